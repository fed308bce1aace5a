"""`HostMemory`: the peak host memory of this process and its children (DataLoader workers) while a
block runs, sampled from /proc (Linux), for `vitscale data info --throughput`.

PSS (proportional set size) is summed, not RSS: forked workers share the parent's pages (torch's
libraries, the index) copy-on-write, and RSS would count each shared page once per process. The
peak RSS of the main process alone is given beside it. Sampled every INTERVAL seconds, so a spike
shorter than that can be missed; the figures are a floor of the true peak, within that.
"""

from __future__ import annotations

import os
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


def tree_pss_kb(pid: int) -> int:
    """PSS of `pid` and every process below it, in KiB."""
    return sum(_field_kb(PROC / str(p) / "smaps_rollup", "Pss:") for p in [pid, *_descendants(pid)])


class HostMemory:
    """`with HostMemory() as memory: ...`, then `memory.figures()`: peak MB (PSS of the process
    tree; RSS of this process) while the block ran, or {} where /proc cannot be read."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.peak_tree_kb = self.peak_main_kb = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while True:
            self.peak_tree_kb = max(self.peak_tree_kb, tree_pss_kb(self.pid))
            self.peak_main_kb = max(self.peak_main_kb, _field_kb(PROC / str(self.pid) / "status", "VmRSS:"))
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
        return {"peak_host_pss_mb": self.peak_tree_kb / 1024, "peak_main_rss_mb": self.peak_main_kb / 1024}
