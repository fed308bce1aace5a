"""Numeric precision of a forward pass: `float32`, or `bfloat16` autocast on CPU or CUDA.

One registry for the trainer (`train.precision`, which also accepts `auto`) and the benchmarks
(`benchmark.dtype`, `vitscale bench --dtype`). Under `bfloat16` only the forward runs under
`torch.autocast`: parameters, gradients, optimizer state and the loss stay float32 (the loop casts
logits to float32 before the loss), and the residual stream stays float32 because each block adds
its bf16 branch to float32 tokens. `auto` is bfloat16 on CUDA and float32 on CPU: on a CPU with AMX
bf16 matmuls are ~3x fp32, but the accuracy cost is the user's call (measured in the issue-30 note).

torch is imported inside the functions: the study format (`TrainConfig`) names these values and
`vitscale --help` must not pay for torch.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Precision name -> the dtype autocast runs the forward in (None: no autocast, plain float32).
AUTOCAST_DTYPES: dict[str, str | None] = {"float32": None, "bfloat16": "bfloat16"}
AUTO = "auto"
# What `auto` becomes per device type; a type not listed trains in float32.
AUTO_BY_DEVICE: dict[str, str] = {"cuda": "bfloat16"}


def resolve_precision(setting: str, device_type: str) -> str:
    """`auto` -> the device type's default (bfloat16 on cuda, else float32); any other name as given."""
    if setting == AUTO:
        return AUTO_BY_DEVICE.get(device_type, "float32")
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
