"""Looped regime: one block applied `depth` times (weights shared across iterations).

The same compute as a discrete model of that depth with the parameters of one block;
the ODE regime with euler and step 1 over [0, depth] is exactly this.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.registry import register_regime


@register_regime("looped")
class Looped(nn.Module):
    """x -> block(block(... block(x))), `depth` applications of one block."""

    last_nfe: int | None = None
    default_layer_scale = 0.1  # model.layer_scale where unset

    def __init__(self, config: ModelConfig, make_block: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.block = make_block()
        self.depth = config.depth

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        for _ in range(self.depth):
            x = self.block(x, grid_hw)
        return x
