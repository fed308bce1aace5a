"""`HostMemory`: the peak host memory of this process and its children (DataLoader workers) while a
block runs, sampled from /proc (Linux), for `vitscale data info --throughput`.

PSS (proportional set size) is summed, not RSS: forked workers share the parent's pages (torch's
libraries, the index) copy-on-write, and RSS would count each shared page once per process. Two
sums: all of it, and its anonymous and shared-memory part (heap, tensors, the batches workers hand
over in /dev/shm) without the mapped files (libraries, code): that part is what a data set can
grow, and unlike the whole it does not move when other processes (a study's trials) map the same
libraries and take their share of those pages. Both are sampled every INTERVAL seconds, so a spike
shorter than that can be missed. Beside them, exact high-water marks the kernel keeps: the peak RSS
of this process and of its largest finished child (a DataLoader worker, once its loader is done).
"""

from __future__ import annotations

import os
import resource
import threading
from pathlib import Path

INTERVAL = 0.05
PROC = Path("/proc")


def _field_kb(path: Path, field: str) -> int:
    """A `Name:  123 kB` line's number in a /proc file; 0 where the process is gone or it lacks one."""
    try:
        for line in path.read_text().splitlines():
            if line.startswith(field):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return 0
    return 0


def _descendants(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = list((PROC / str(current) / "task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                children = [int(c) for c in (task / "children").read_text().split()]
            except (OSError, ValueError):
                continue
            found.extend(children)
            todo.extend(children)
    return found


def tree_pss_kb(pid: int, fields: tuple[str, ...] = ("Pss:",)) -> int:
    """The `fields` of PSS (all of it; or e.g. "Pss_Anon:", "Pss_Shmem:") of `pid` and every
    process below it, in KiB."""
    rollups = [PROC / str(p) / "smaps_rollup" for p in [pid, *_descendants(pid)]]
    return sum(_field_kb(rollup, field) for rollup in rollups for field in fields)


class HostMemory:
    """`with HostMemory() as memory: ...`, then `memory.figures()`: peak MB (PSS of the process
    tree, all and anonymous + shared memory, while the block ran; the RSS high-water marks of
    this process and its largest finished child, over the process's life), or {} where /proc
    cannot be read."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.peak_tree_kb = self.peak_anon_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_tree_kb = max(self.peak_tree_kb, tree_pss_kb(self.pid))
            self.peak_anon_kb = max(self.peak_anon_kb, tree_pss_kb(self.pid, ("Pss_Anon:", "Pss_Shmem:")))
            if self._stop.wait(INTERVAL):
                return

    def __enter__(self) -> HostMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def figures(self) -> dict[str, float]:
        if not self.peak_tree_kb:
            return {}
        return {
            "peak_host_pss_mb": self.peak_tree_kb / 1024,
            "peak_host_anon_mb": self.peak_anon_kb / 1024,
            "max_rss_main_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,  # KiB on Linux
            "max_rss_worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
        }
