"""Axial attention (Ho et al. 2019): softmax attention along the rows of the grid, then the columns.

Per head, with one set of queries and keys, the grid tokens are mixed by

    y = A_cols (A_rows v),   A_rows[i] = softmax(q kᵀ/√d) over the W tokens of i's row,
                             A_cols[i] = softmax(q kᵀ/√d) over the H tokens of i's column,

so after one mixer every grid token has seen every other (row, then column), as in one
full attention, at O(N·(H + W)·C) = O(N^1.5·C) per layer — SSoG's order, but content-dependent:
the separable, data-dependent control for SSoG's separable, data-independent kernels.
`model.axial.order` may put columns first. Both passes run on the fused SDPA kernel.

Prefix (cls) tokens are queries over *all* tokens (prefix and grid) in one full attention row
each: O(N·C), so they read the whole image at every layer, as in ViT. They are not sources for
the grid tokens (axial lines are lines of the grid), which keeps the grid operator exactly
axial. Parameters: attention's exactly — qkv (3·C² + 3·C) and proj (C² + C), 4·C² + 4·C per
mixer — plus 4·head_dim with QK-norm (`model.axial.qk_norm`; off unless set, as for
attention). Lipschitz bound: none in closed form (softmax of data-dependent logits): n/a.
FLOPs per image: 4·N·(H + W)·C (rows and columns) + 4·P·(P + N)·C (prefix rows).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.mixers.axial_settings import AxialSettings  # noqa: F401 (resume: older pickles name it here)
from vitscale.models.mixers.grid import prefix_count


class AxialAttention(nn.Module):
    """Row attention then column attention over the grid; prefix tokens attend to all tokens."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)
        settings = config.settings("axial")
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        self.order = settings.order
        qk_norm = settings.qk_norm
        self.qkv = nn.Linear(config.width, 3 * config.width)
        self.q_norm = nn.LayerNorm(self.head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.proj = nn.Linear(config.width, config.width)

    def no_weight_decay(self) -> tuple[str, ...]:
        """Nothing beyond the usual (biases, norm gains): its weights are attention's."""
        return ()

    @staticmethod
    def _along(q: Tensor, k: Tensor, v: Tensor, axis: int) -> Tensor:
        """Attention within each line of the grid along `axis` (2: columns of H tokens, 3: rows of W)."""
        if axis == 2:  # (B, h, H, W, d) -> lines are columns: put H next to d
            q, k, v = (t.transpose(2, 3) for t in (q, k, v))
        out = F.scaled_dot_product_attention(q, k, v)  # batched over (B, h, line)
        return out.transpose(2, 3) if axis == 2 else out

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, P + H·W, C), P prefix tokens first, grid tokens row-major."""
        b, t, c = x.shape
        gh, gw = grid_hw
        p = prefix_count(x, grid_hw, "axial attention")
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, T, d)
        q, k = self.q_norm(q), self.k_norm(k)
        grid = [s[:, :, p:].reshape(b, self.heads, gh, gw, self.head_dim) for s in (q, k, v)]
        first, second = (3, 2) if self.order == "rows_first" else (2, 3)
        mixed = self._along(grid[0], grid[1], grid[2], first)
        mixed = self._along(grid[0], grid[1], mixed, second).reshape(b, self.heads, gh * gw, self.head_dim)
        if p:
            prefix = F.scaled_dot_product_attention(q[:, :, :p], k, v)  # full rows: O(N) each
            mixed = torch.cat([prefix, mixed], dim=2)
        return self.proj(mixed.transpose(1, 2).reshape(b, t, c))

    def extra_repr(self) -> str:
        return f"heads={self.heads}, order={self.order}"
