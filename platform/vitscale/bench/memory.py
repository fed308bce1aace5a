"""Peak memory of one configuration, and recognising out-of-memory failures.

CUDA: the caching allocator's own counters (reset before the first iteration, read after
the last), exact and per device. CPU has no such counter, so each configuration runs in its
own subprocess (see `isolate`) and its peak resident set size is read from the kernel (VmHWM, see
`own_peak_rss_mb`): once idle, before the model is built (Python, torch, vitscale and what
counting FLOPs imports: ~370 MB, the same for every configuration; `measure.idle_peak_mb`), then
after one inference iteration and after one training step, the high-water mark reset to the
current RSS before each (`reset_peak_rss`), so the two modes' peaks are told apart in one process.
A mode's peak memory is its peak minus the idle one: with the idle part left in, every ratio
between mixers read ~1.00×.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import torch

OOM_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory", "DefaultCPUAllocator")


def rss_to_mb(maxrss: int) -> float:
    """ru_maxrss is KiB on Linux and bytes on macOS."""
    return maxrss / (1024 * 1024) if sys.platform == "darwin" else maxrss / 1024


def own_peak_rss_mb() -> float:
    """Peak resident set size of this process image so far.

    Linux: VmHWM of /proc/self/status. Not ru_maxrss: the kernel carries a forked parent's
    high-water mark across exec into the child's ru_maxrss, so a worker started by a big
    parent (the CLI with mlflow and torch loaded) would report the parent's size.
    """
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return rss_to_mb(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def reset_peak_rss() -> bool:
    """Lower this process's VmHWM to its current RSS (Linux: `5` into /proc/self/clear_refs, since
    4.0); False where that is not possible, so a later peak still includes every earlier one."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def is_oom(exc: BaseException) -> bool:
    """torch.OutOfMemoryError (CUDA), MemoryError, or a CPU allocator failure."""
    if isinstance(exc, torch.OutOfMemoryError | MemoryError):
        return True
    return isinstance(exc, RuntimeError) and any(m in str(exc) for m in OOM_MARKERS)


def cuda_reset(device: torch.device) -> float:
    """Start counting the peak; return what is allocated now (MB): weights and inputs."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    return torch.cuda.memory_allocated(device) / 2**20


def cuda_peak_mb(device: torch.device) -> float:
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) / 2**20


def release(device: torch.device) -> None:
    """Give cached blocks back after a configuration (an OOM one especially)."""
    import gc

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
