"""Learning-rate schedule: linear warmup then cosine decay to a floor, stepped per batch."""

from __future__ import annotations

import math

import torch


def warmup_cosine(
    optimizer: torch.optim.Optimizer,
    total_steps: int,
    warmup_steps: int,
    min_lr_ratio: float,
) -> torch.optim.lr_scheduler.LambdaLR:
    """Multiplier 0 -> 1 over `warmup_steps`, then cosine from 1 to `min_lr_ratio` at `total_steps`."""
    total_steps = max(1, total_steps)
    warmup_steps = min(max(0, warmup_steps), total_steps)

    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / warmup_steps
        span = max(1, total_steps - warmup_steps)
        progress = min(1.0, (step - warmup_steps) / span)
        return min_lr_ratio + (1 - min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
