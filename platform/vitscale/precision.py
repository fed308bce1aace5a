"""Numeric precision of a forward pass: `float32`, or `bfloat16` autocast on CPU or CUDA.

One registry for the trainer (`train.precision`, which also accepts `auto`) and the benchmarks
(`benchmark.dtype`, `vitscale bench --dtype`). Under `bfloat16` only the forward runs under
`torch.autocast`: parameters, gradients, optimizer state and the loss stay float32 (the loop casts
logits to float32 before the loss), and the residual stream stays float32 because each block adds
its bf16 branch to float32 tokens. `auto` is bfloat16 on CUDA, bfloat16 on a CPU with native bf16
instructions (AVX512-BF16 or AMX: oneDNN runs the matmuls there at twice fp32's rate, and a training
step of the width-64 Fashion-MNIST ViT took 0.85 ms/image against 1.70 in fp32, at the same test
accuracy after 3 epochs: 81.5 % vs 81.0 %; issue 35), and float32 on other CPUs, where bf16 is
emulated and slower.

torch is imported inside the functions: the study format (`TrainConfig`) names these values and
`vitscale --help` must not pay for torch.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Precision name -> the dtype autocast runs the forward in (None: no autocast, plain float32).
AUTOCAST_DTYPES: dict[str, str | None] = {"float32": None, "bfloat16": "bfloat16"}
AUTO = "auto"
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")  # /proc/cpuinfo flags of native bf16 arithmetic


@functools.cache
def cpu_has_native_bf16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this CPU computes bf16 natively (Linux flags; elsewhere unknown, so no)."""
    try:
        with open(cpuinfo) as handle:
            flags = next((line for line in handle if line.startswith("flags")), "").split()
    except OSError:
        return False
    return any(flag in flags for flag in CPU_BF16_FLAGS)


# What `auto` becomes per device type; a type not listed trains in float32.
AUTO_BY_DEVICE: dict[str, Callable[[], str]] = {
    "cuda": lambda: "bfloat16",
    "cpu": lambda: "bfloat16" if cpu_has_native_bf16() else "float32",
}


def resolve_precision(setting: str, device_type: str) -> str:
    """`auto` -> the device type's default (bfloat16 on cuda and on CPUs with native bf16, else
    float32); any other name as given."""
    if setting == AUTO:
        return AUTO_BY_DEVICE.get(device_type, lambda: "float32")()
    if setting not in AUTOCAST_DTYPES:
        raise ValueError(f"unknown precision {setting!r}; choose one of {[AUTO, *AUTOCAST_DTYPES]}")
    return setting


def autocast(precision: str, device: torch.device | str) -> contextlib.AbstractContextManager:
    """The context the forward runs in: `torch.autocast` for bfloat16 (CPU or CUDA), else nothing.

    `precision` is resolved first (`auto` against this device), so callers may pass a setting."""
    import torch

    device_type = torch.device(device).type
    dtype = AUTOCAST_DTYPES[resolve_precision(precision, device_type)]
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device_type, dtype=getattr(torch, dtype))
