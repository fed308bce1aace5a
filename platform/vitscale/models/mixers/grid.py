"""What every grid-aware mixer needs first: how many prefix tokens precede the grid."""

from __future__ import annotations

from torch import Tensor


def prefix_count(x: Tensor, grid_hw: tuple[int, int], mixer: str) -> int:
    """P in x = (B, P + H·W, C): prefix (cls) tokens first, the grid row-major after them."""
    p = x.shape[1] - grid_hw[0] * grid_hw[1]
    if p < 0:
        raise ValueError(f"{mixer} got {x.shape[1]} tokens for a {grid_hw[0]}x{grid_hw[1]} grid")
    return p
