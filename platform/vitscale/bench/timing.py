"""What one timed iteration is (inference or a training step) and how iterations are timed.

Timing follows timm's benchmark: `warmup` untimed iterations (allocator, cuDNN/oneDNN
autotuning, torch.compile), then `repeats` timed ones; on CUDA the device is synchronised
before the clock starts and before it stops, so each sample is the whole iteration's device
time. The median is reported (robust to a stray slow sample on a shared machine), with the
repeats' spread (`relative_spread`: their interquartile range over the median), which a ratio
between two configurations must beat before a report calls one of them ahead (`bench.margin`).

On CPU the process CPU time of each iteration (user + system, all threads) is kept beside
the wall time: on a machine shared with other work, a single-threaded run's CPU time leaves
out the time it spent descheduled, so CPU-time ratios between mixers are far steadier than
wall-clock ones (caches and memory bandwidth are still shared). With several threads it is
their sum, not a latency.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.device import adamw_kwargs
from vitscale.precision import autocast


def synchronizer(device: torch.device) -> Callable[[], None]:
    """A no-argument function that waits for the device's queued work (no-op on CPU)."""
    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def precision(device: torch.device, dtype: str) -> contextlib.AbstractContextManager:
    """bfloat16: autocast on the device (CUDA and CPU); float32: nothing (`vitscale.precision`,
    the trainer's rule)."""
    return autocast(dtype, device)


def time_iterations(
    step: Callable[[], object],
    warmup: int,
    repeats: int,
    synchronize: Callable[[], None],
    cpu_times: list[float] | None = None,
) -> list[float]:
    """Run `step` warmup + repeats times; return the wall seconds of each timed iteration.

    cpu_times: if given, the process CPU seconds of each timed iteration are appended to it.
    """
    for _ in range(warmup):
        step()
    synchronize()
    times = []
    for _ in range(repeats):
        cpu = time.process_time()
        start = time.perf_counter()
        step()
        synchronize()
        times.append(time.perf_counter() - start)
        if cpu_times is not None:
            cpu_times.append(time.process_time() - cpu)
    return times


def relative_spread(samples: list[float]) -> float | None:
    """Interquartile range of the timed repeats over their median (None below 2 repeats): how far
    two timings of one configuration lie apart, so how far apart two configurations must be."""
    if len(samples) < 2:
        return None
    q1, median, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return (q3 - q1) / median if median > 0 else None


def summarise(times: list[float], batch_size: int) -> dict[str, float | None]:
    """Median latency per batch (ms), the throughput it implies (images/s) and the repeats' spread."""
    median = statistics.median(times)
    return {
        "latency_ms": 1e3 * median,
        "images_per_second": batch_size / median,
        "latency_spread": relative_spread(times),
    }


def inference_step(
    model: nn.Module, images: Tensor, device: torch.device, dtype: str
) -> Callable[[], Tensor]:
    """One forward in eval mode under inference_mode (and autocast for bfloat16)."""
    model.eval()

    def step() -> Tensor:
        with torch.inference_mode(), precision(device, dtype):
            return model(images)

    return step


def train_step(
    model: nn.Module, images: Tensor, labels: Tensor, device: torch.device, dtype: str
) -> Callable[[], Tensor]:
    """Forward, cross-entropy, backward and an AdamW step (zeroing gradients to None), the
    trainer's AdamW implementation (fused where the device has it)."""
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, **adamw_kwargs(device))

    def step() -> Tensor:
        with precision(device, dtype):
            loss = F.cross_entropy(model(images).float(), labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return loss

    return step
