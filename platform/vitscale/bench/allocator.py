"""The C allocator setting a CPU benchmark worker starts with: large buffers kept, not re-faulted.

glibc's malloc serves a request above its mmap threshold (adaptive, at most 32 MB) with a fresh
mmap and gives it back with munmap on free, and trims the top of its heap when more than the trim
threshold (twice the adaptive mmap threshold) lies free there. A forward at 768 px allocates and
frees buffers of that size in every block (SSoG's K-fold intermediate, the MLP hidden layer, addmm
outputs: 28 MB each at width 192, batch 4), so each call faults every 4 KiB page in again and the
kernel zeroes it: 69,000 minor faults per forward of a depth-4 model. With both thresholds fixed
high, freed buffers stay in the heap for the next call: no fault after the first forwards, and
25 % less CPU time per SSoG forward, 17 % per sdpa forward (docs/performance.md, allocator section).

glibc reads `GLIBC_TUNABLES` once, at process start, so the setting goes into the environment of
the worker subprocess (`isolate`), never into a running process; other C libraries ignore it. A
`GLIBC_TUNABLES` the caller already set (even empty) is theirs and passes through unchanged: set
`GLIBC_TUNABLES=` to time with glibc's defaults.

Timing only: a worker that measures peak memory keeps glibc's defaults. A heap that keeps freed
buffers holds holes, and glibc 2.36's posix_memalign (torch's CPU allocator) cannot reuse a hole of
exactly its own size, so the heap grows before it settles: with the setting the peak RSS above idle
of one iteration rose from 210-217 to 237-238 MB (sdpa) and from 244-270 to 272-326 MB (SSoG).
Training trials do not set it: at the sizes they train (28 to 64 px) no buffer passes 32 MB.
"""

from __future__ import annotations

from collections.abc import Mapping

TUNABLES = "GLIBC_TUNABLES"
# A buffer up to 1 GiB comes from the heap, and the heap gives memory back only above 2 GiB free.
MMAP_THRESHOLD = 1 << 30
TRIM_THRESHOLD = 1 << 31
SETTING = f"glibc.malloc.mmap_threshold={MMAP_THRESHOLD}:glibc.malloc.trim_threshold={TRIM_THRESHOLD}"


def allocator_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to add to `environ` for a benchmark worker (none when it sets GLIBC_TUNABLES)."""
    return {} if TUNABLES in environ else {TUNABLES: SETTING}
