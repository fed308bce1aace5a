"""Discrete regime: `depth` distinct pre-norm blocks, the standard ViT."""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.registry import register_regime


@register_regime("discrete")
class Discrete(nn.Module):
    """x -> block_L(... block_1(x)), each block with its own weights."""

    last_nfe: int | None = None
    default_layer_scale = 0.0  # model.layer_scale where unset

    def __init__(self, config: ModelConfig, make_block: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(make_block() for _ in range(config.depth))

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        for block in self.blocks:
            x = block(x, grid_hw)
        return x
