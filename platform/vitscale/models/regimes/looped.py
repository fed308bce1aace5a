"""Looped regime: one block applied `depth` times (weights shared across iterations).

The same compute as a discrete model of that depth with the parameters of one block;
the ODE regime with euler and step 1 over [0, depth] is exactly this.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.regions import EAGER, bound


class Looped(nn.Module):
    """x -> block(block(... block(x))), `depth` applications of one block."""

    last_nfe: int | None = None
    flops_depend_on_values = False  # the same compute for any weights: counted on the meta device
    region_setting = EAGER  # `vitscale.models.regions.compile_regions` compiles `stack`

    def __init__(self, config: ModelConfig, make_block: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.block = make_block()
        self.depth = config.depth

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        return bound(self, "stack", self.region_setting)(x, grid_hw)

    def stack(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """The `depth` applications: this regime's region (`vitscale.models.regions`)."""
        for _ in range(self.depth):
            x = self.block(x, grid_hw)
        return x

    def forward_flops(self, outside: float, stack: float, nfe: float | None = None) -> float:
        """Forward FLOPs of one image: `outside` the regime plus the `depth` applications (`stack`)."""
        return outside + stack

    def training_flops(self, outside: int, stack: int, forward_nfe=None, backward_nfe=None) -> int:
        """Forward + backward FLOPs of one training image: backward = 2 x forward (the 3x rule;
        sharing the weights changes the parameter count, not the compute)."""
        return 3 * (outside + stack)

    def backward_guard(self) -> AbstractContextManager[None]:
        """Around `loss.backward()`: nothing runs there that can fail as a trial failure."""
        return nullcontext()
