"""Discrete regime: `depth` distinct pre-norm blocks, the standard ViT."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.regions import EAGER, bound


class Discrete(nn.Module):
    """x -> block_L(... block_1(x)), each block with its own weights."""

    last_nfe: int | None = None
    flops_depend_on_values = False  # the same compute for any weights: counted on the meta device
    region_setting = EAGER  # `vitscale.models.regions.compile_regions` compiles `stack`

    def __init__(self, config: ModelConfig, make_block: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(make_block() for _ in range(config.depth))

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        return bound(self, "stack", self.region_setting)(x, grid_hw)

    def stack(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """The blocks one after another: this regime's region (`vitscale.models.regions`)."""
        for block in self.blocks:
            x = block(x, grid_hw)
        return x

    def forward_flops(self, outside: float, stack: float, nfe: float | None = None) -> float:
        """Forward FLOPs of one image: `outside` the regime plus the whole `stack` (no NFE)."""
        return outside + stack

    def training_flops(self, outside: int, stack: int, forward_nfe=None, backward_nfe=None) -> int:
        """Forward + backward FLOPs of one training image: backward = 2 x forward (the 3x rule)."""
        return 3 * (outside + stack)

    def backward_guard(self) -> AbstractContextManager[None]:
        """Around `loss.backward()`: nothing runs there that can fail as a trial failure."""
        return nullcontext()
