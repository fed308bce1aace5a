"""PoolFormer's token mixer (Yu et al. 2022, MetaFormer): average pooling minus the input.

    y = AvgPool_{k x k, stride 1, pad k//2, count_include_pad=False}(x) - x   on the H x W grid

Parameter-free: the MetaFormer control — how much of a ViT's accuracy the block structure
gives with a mixer that learns nothing. Per block it has attention's parameters minus the
qkv and proj layers (4·C² + 4·C). Like PoolFormer it declines the position embedding (the
padding-aware average already breaks translation symmetry at the borders); a model that wants
one sets `model.pos_embed`. k is `model.pooling.pool_size` (odd; PoolFormer uses 3).

Prefix (cls) tokens receive the grid mean, y_cls = mean(x_grid), as SSoG's do: a read-out of the
global pool PoolFormer's head uses, never a source. Not "mean - x_cls" (PoolFormer's form applied
to cls): x_cls enters through LayerNorm, so in the ODE regime that term is f(cls) ~ -LN(cls), a
field that jumps where cls crosses zero (it starts at ~1e-6) and makes adaptive solvers chatter.
Cost: k²·N·C additions, O(N·C); FlopCounterMode ignores pooling, so its count is registered.

Linear, so its Lipschitz constant is its operator norm, computed exactly: per channel the
token operator is M = [[0, (1/N)·1ᵀ], [0, A_H ⊗ A_W - I_N]] (A: the 1-D row-normalised
k-tap averages; the 2-D divisor is the product of the 1-D counts), the same for every channel,
so ||mixer|| = σ_max(M) (dense SVD up to 1024 tokens, ARPACK on the sparse M beyond).
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from scipy import sparse
from scipy.sparse.linalg import svds
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.measure import register_flops
from vitscale.models.mixers.grid import prefix_count
from vitscale.models.mixers.pooling_settings import PoolingSettings  # noqa: F401 (resume: older pickles name it here)

DENSE_LIMIT = 1024  # tokens up to which the norm comes from a dense SVD


def _pool_flops(x_shape, kernel_size, *args, out_shape=None, **kwargs) -> int:
    """k² additions and one division per output element."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else tuple(kernel_size)[-2:]
    return math.prod(out_shape) * (kh * kw + 1)


register_flops(torch.ops.aten.avg_pool2d, _pool_flops)


def averaging_matrix(length: int, pool_size: int) -> sparse.csr_matrix:
    """The 1-D k-tap average with count_include_pad=False: row i averages the valid neighbours of i."""
    r = min(pool_size // 2, length - 1)  # a window wider than the grid covers all of it
    band = sparse.diags([np.ones(length - abs(o)) for o in range(-r, r + 1)], list(range(-r, r + 1)))
    band = sparse.csr_matrix(band)
    return sparse.diags(1.0 / np.asarray(band.sum(1)).ravel()) @ band


def token_operator(grid_hw: tuple[int, int], pool_size: int, prefix_tokens: int) -> sparse.csr_matrix:
    """M, the (P + N) x (P + N) matrix the mixer applies to each channel."""
    n, p = grid_hw[0] * grid_hw[1], prefix_tokens
    grid = sparse.kron(averaging_matrix(grid_hw[0], pool_size), averaging_matrix(grid_hw[1], pool_size))
    top = sparse.hstack([sparse.csr_matrix((p, p)), sparse.csr_matrix(np.full((p, n), 1.0 / n))])
    bottom = sparse.hstack([sparse.csr_matrix((n, p)), grid - sparse.identity(n)])
    return sparse.csr_matrix(sparse.vstack([top, bottom]) if p else grid - sparse.identity(n))


class Pooling(nn.Module):
    """Average pooling minus identity on the grid; prefix tokens receive the grid mean."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.pool_size = config.settings("pooling").pool_size
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, P + H·W, C), P prefix tokens first, grid tokens row-major."""
        b, t, c = x.shape
        gh, gw = grid_hw
        p = prefix_count(x, grid_hw, "pooling")
        grid = x[:, p:].transpose(1, 2).reshape(b, c, gh, gw)
        k = self.pool_size
        pooled = F.avg_pool2d(grid, k, stride=1, padding=k // 2, count_include_pad=False)
        mixed = (pooled - grid).reshape(b, c, gh * gw).transpose(1, 2)
        if not p:
            return mixed
        return torch.cat([x[:, p:].mean(1, keepdim=True).expand(b, p, c), mixed], dim=1)

    def lipschitz_bound(self, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> float:
        """The exact operator norm σ_max(M) (l2 over all tokens and channels)."""
        m = token_operator(tuple(grid_hw), self.pool_size, prefix_tokens)
        if m.shape[0] <= DENSE_LIMIT:
            return float(np.linalg.norm(m.toarray(), 2))
        return float(svds(m, k=1, return_singular_vectors=False, tol=1e-10, random_state=0)[0])

    def extra_repr(self) -> str:
        return f"pool_size={self.pool_size}"
