"""SSoG: separable sum-of-Gaussians token mixing (arXiv 2611.08236), O(K·C·N^1.5) per layer.

Per head h the grid operator is a weighted sum of K separable 2-D Gaussians,

    D_h = sum_k w[h,k] · A_rows[h,k] ⊗ A_cols[h,k],

where A_rows[h,k] (H x H) and A_cols[h,k] (W x W) are 1-D Gaussian kernels with learned
width sigma (log-parametrised, so always positive) and optional learned centre offset mu,
in coordinates normalised to the grid (token i sits at i/H), so one set of weights runs
at any resolution. Each kernel row is normalised to sum to one (a softmax over the
Gaussian's log-density: numerically safe for any sigma), so every separable term is an
averaging operator like an attention row; the mixture weights w are free (negative
weights give difference-of-Gaussians). Values come from a linear projection and go out
through another, as in attention, but there are no queries or keys: 2·C² fewer weights.

Prefix (cls) tokens: the grid is mixed without them, and each prefix token receives the
grid mean of the *mixed* values, (1/N)·1^T D_h v (global average pooling after mixing,
through the same value/output projections). They are a read-out, never a source, so the
grid operator is exactly D_h. Pooling the mixed (not the raw) values matters: with the
head reading the cls token, the last block's kernels would otherwise get no gradient.

The operator is applied as two batched matmuls, never as an N x N matrix:
  1. rows:    u[h, (i, k), (j, b, d)] = sum_i' A_rows[h,k,i,i'] v[h, i', (j, b, d)]
  2. columns: y[h, i, j, (b, d)]      = sum_(k, j') w[h,k] A_cols[h,k,j,j'] u[h, i, (k, j'), (b, d)]
The mixture is not separable (sum_k w_k A_k ⊗ B_k is not one Kronecker product for K > 1),
so the K row-filtered copies u are needed. Rows first or columns first, an exact separable
application costs 2·K·N·(H + W)·C FLOPs per image (an N x N operator: 2·N²·C); step 1
orders its rows (i, k) so that step 2 contracts the adjacent pair (k, j') in one GEMM with
the mixture weights folded into the column kernel. Copies of the activations: the permute
into the head-major layout, and one strided write of the result into the (B, P + N, C)
buffer that also receives the prefix rows (no torch.cat). A GEMM cannot put heads outermost
and head channels innermost at once, so some copy is unavoidable; the other candidates
(permuting u, K times larger, or broadcasting activations over heads) move more bytes.
Step 2 broadcasts the column kernel over rows (heads·H·W·K·W elements, independent of the
batch): with autograd that broadcast is a copy per call; the cached operands keep it materialised.

Without autograd (eval, `torch.no_grad`, `torch.inference_mode`) the operands are kept between
forwards in a `models.kernel_cache.KernelCache`, keyed on grid, dtype and device and valid while the
kernel parameters (log_sigma, offset, mix) hold the values they were built from (compared by
value: fused AdamW does not bump versions), so an optimiser step, EMA update or load_state_dict
rebuilds them. `kernel_cache_scope`, which `VisionTransformer` opens around each forward, makes
that comparison once per forward rather than once per call. Kept between forwards: heads·H·K·H +
heads·H·W·K·W elements per mixer. With autograd on the cache is not used: every call builds its
own kernels.
The K-fold intermediate u is not kept between calls (an `out=` buffer): one per mixer would hold
depth·|u| beyond the peak in a discrete model (28 MB each at 768 px, width 192, batch 4), and
its cost was glibc re-faulting it on every call, which the benchmark workers' allocator setting
removes for every large buffer at once (`bench.allocator`).
FLOPs per image: 2·K·N·(H + W)·C.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.kernel_cache import KernelCache
from vitscale.models.mixers.grid import prefix_count
from vitscale.models.mixers.ssog_settings import SSoGSettings


def gaussian_kernels(length: int, log_sigma: Tensor, offset: Tensor | None) -> Tensor:
    """Row-normalised 1-D Gaussian kernels on a grid of `length` tokens.

    log_sigma, offset: (heads, K). Returns (heads, K, length, length) where row i holds
    the weights token i gives to tokens j, centred at i/length + offset.
    """
    coords = torch.arange(length, device=log_sigma.device, dtype=log_sigma.dtype) / length
    disp = coords[None, :] - coords[:, None]  # [i, j] = (j - i) / length
    centred = disp - offset[..., None, None] if offset is not None else disp.expand(*log_sigma.shape, -1, -1)
    inv_var = torch.exp(-2.0 * log_sigma)[..., None, None]
    return torch.softmax(-0.5 * centred.square() * inv_var, dim=-1)


def initial_sigma_range(settings: SSoGSettings, grid_hw: tuple[int, int]) -> tuple[float, float]:
    """(narrowest, widest) initial width in normalised coordinates (1 = the grid side)."""
    side = min(grid_hw)
    return settings.sigma_min_tokens / side, settings.sigma_max_grid


class SSoG(nn.Module):
    """Separable sum-of-Gaussians mixer; see the module docstring for the operator."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        settings = config.settings("ssog")
        self.num_gaussians = k = settings.num_gaussians
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)
        self.v = nn.Linear(config.width, config.width)
        self.out = nn.Linear(config.width, config.width)
        self.kernel_lr_scale = settings.kernel_lr_scale
        # Widths spread geometrically from about half a token to the whole grid (in coordinates
        # normalised to the grid), interleaved so every head sees a range. Fixed fractions of the
        # image side left the narrowest kernels numerically the identity on small grids (their
        # width gradient ~0, so they never moved).
        lo, hi = initial_sigma_range(settings, config.grid)
        sigmas = torch.logspace(math.log10(lo), math.log10(hi), self.heads * k)
        log_sigma = sigmas.log().reshape(k, self.heads).t()  # (heads, K)
        self.log_sigma = nn.Parameter(log_sigma.repeat(2, 1, 1))  # (axis: rows, cols; heads; K)
        self.offset = nn.Parameter(torch.zeros(2, self.heads, k)) if settings.offsets else None
        self.mix = nn.Parameter(torch.full((self.heads, k), 1.0 / k))  # w[h, k]
        self.kernel_cache = KernelCache()  # operands kept between no-grad forwards (module docstring)

    def no_weight_decay(self) -> tuple[str, ...]:
        """Kernel parameters are exempt: decay would pull every width towards sigma = 1 and the
        mixture towards 0 — a prior attention's weights do not get."""
        return ("log_sigma", "offset", "mix")

    def lr_scale(self) -> dict[str, float]:
        """Learning-rate multipliers of own parameters (the optimiser's groups, train.optimizer)."""
        return {"log_sigma": self.kernel_lr_scale, "offset": self.kernel_lr_scale}

    def kernels(self, grid_hw: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """(A_rows (heads, K, H, H), A_cols (heads, K, W, W)) for this grid; cheap, rebuilt per call."""
        h, w = grid_hw
        if h == w:  # square grid: both axes in one softmax
            both = gaussian_kernels(h, self.log_sigma, self.offset)
            return both[0], both[1]
        off_r, off_c = (None, None) if self.offset is None else (self.offset[0], self.offset[1])
        return gaussian_kernels(h, self.log_sigma[0], off_r), gaussian_kernels(w, self.log_sigma[1], off_c)

    def operands(self, grid_hw: tuple[int, int]) -> tuple[Tensor, Tensor]:
        """GEMM operands: rows (heads, H·K, H) ordered (i, k); cols (heads, 1, W, K·W) with w folded in."""
        heads, k = self.heads, self.num_gaussians
        a_rows, a_cols = self.kernels(grid_hw)
        rows = a_rows.transpose(1, 2).reshape(heads, grid_hw[0] * k, grid_hw[0])
        cols = (a_cols * self.mix[:, :, None, None].to(a_cols.dtype)).transpose(1, 2)
        return rows, cols.reshape(heads, 1, grid_hw[1], k * grid_hw[1])

    def operands_for(self, grid_hw: tuple[int, int], dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """`operands` in `dtype`; without autograd from the kernel cache, cols broadcast over rows."""
        if torch.is_grad_enabled() or torch.compiler.is_compiling():
            rows, cols = self.operands(grid_hw)
            return rows.to(dtype), cols.to(dtype)
        params = tuple(p for p in (self.log_sigma, self.offset, self.mix) if p is not None)
        return self.kernel_cache.get(
            (grid_hw, dtype, self.mix.device), params, lambda: self._kept(grid_hw, dtype)
        )

    def _kept(self, grid_hw: tuple[int, int], dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """The operands as the cache keeps them: cols materialised as (heads, H, W, K·W), so step 2's
        matmul views it as a batch of GEMMs instead of copying the broadcast every call."""
        rows, cols = self.operands(grid_hw)
        return rows.to(dtype), cols.to(dtype).expand(-1, grid_hw[0], -1, -1).contiguous()

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, P + H·W, C), P prefix tokens first, grid tokens row-major."""
        b, t, c = x.shape
        gh, gw = grid_hw
        n, p = gh * gw, prefix_count(x, grid_hw, "SSoG")
        heads, d, k = self.heads, self.head_dim, self.num_gaussians
        v = self.v(x)
        rows, cols = self.operands_for(grid_hw, v.dtype)
        # Head-major layout (heads, H, (W, B, d)): rows are the contraction of step 1.
        vh = v[:, p:].reshape(b, gh, gw, heads, d).permute(3, 1, 2, 0, 4).reshape(heads, gh, gw * b * d)
        u = torch.matmul(rows, vh)  # (heads, (H, K), (W, B, d))
        y = torch.matmul(cols, u.view(heads, gh, k * gw, b * d))  # (heads, H, W, (B, d))
        y_tokens = y.view(heads, gh, gw, b, d).permute(3, 1, 2, 0, 4)  # (B, H, W, heads, d), a view
        if not p:
            return self.out(y_tokens.reshape(b, n, c))
        mixed = v.new_empty(b, t, c)
        mixed[:, p:].view(b, gh, gw, heads, d).copy_(y_tokens)
        pooled = y.view(heads, n, b, d).mean(1).transpose(0, 1).reshape(b, 1, c)
        mixed[:, :p] = pooled.expand(b, p, c)
        return self.out(mixed)

    @torch.no_grad()
    def head_norm_bounds(self, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> Tensor:
        """Per head, an upper bound of ||M_h||_2, the token operator (prefix rows included).

        Grid part: ||D_h|| <= sum_k |w_hk|·||A_rows[h,k]||·||A_cols[h,k]|| (||A ⊗ B|| = ||A||·||B||
        and the triangle inequality; exact for K = 1). Each of the P prefix rows is the grid mean
        of the mixed values, and (1^T y)^2 <= N·||y||^2, so ||M_h z||^2 <= (1 + P/N)·||D_h z||^2.
        """
        rows, cols = self.kernels(grid_hw)
        norm = torch.linalg.matrix_norm
        grid = self.mix.abs().double() * norm(rows.double(), ord=2) * norm(cols.double(), ord=2)
        return grid.sum(-1) * math.sqrt(1 + prefix_tokens / (grid_hw[0] * grid_hw[1]))

    @torch.no_grad()
    def lipschitz_bound(self, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> float:
        """||W_out||·max_h ||M_h||·||W_v||: projections act per token, mixing per channel with its
        head's M_h; norms of a composition multiply, biases add constants. The kernels do not
        depend on x, so this bounds the mixer itself."""
        heads = self.head_norm_bounds(grid_hw, prefix_tokens)
        w_v = torch.linalg.matrix_norm(self.v.weight.double(), ord=2)
        w_out = torch.linalg.matrix_norm(self.out.weight.double(), ord=2)
        return float(w_out * heads.max() * w_v)

    def extra_repr(self) -> str:
        return f"heads={self.heads}, num_gaussians={self.num_gaussians}, offsets={self.offset is not None}"
