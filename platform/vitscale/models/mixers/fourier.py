"""Fourier mixing (FNet, Lee-Thorp et al. 2022), on the token grid: y = Re(FFT2(x)).

FNet replaces attention with the real part of a 2-D DFT over (sequence, hidden). A ViT's
sequence is a grid, so the transform here is over the grid's two axes, per channel, and by
default *only* spatially (`model.fourier.channels: true` adds FNet's transform over channels):
a token mixer should mix tokens — the MLP mixes channels, with learned weights — and every
other mixer here leaves channels alone, so the comparison stays about token mixing.
The DFT is unitary (norm="ortho") where FNet's is unnormalised: unnormalised, the output
grows like √N with the resolution (x64 at 1024 px, patch 16), which a pre-norm residual
stream and an ODE field cannot absorb; unitary, the same model runs at any resolution.
Parameter-free: per block attention's parameters minus qkv and proj (4·C² + 4·C); it keeps
the position embedding, as FNet does (Re ∘ DFT is not translation-equivariant anyway).

Prefix (cls) tokens receive the DC coefficient, the output at grid frequency (0, 0):
Σ_n x_n / √N (through the channel transform when it is on): the transform's own global summary.
Cost: 5·n·log2(n) FLOPs per length-n transform (the standard count; FlopCounterMode ignores
FFTs, so it is registered here): 5·N·log2(N)·C per image, O(N log N).

Lipschitz constant, exact: R = Re(F) for the symmetric unitary DFT F (2-D, or 3-D with channels)
satisfies R² = (Π + I)/2 with Π = F² an involution, so ||R|| = 1; the P prefix rows copy the
(0, 0) row, whose span is invariant, giving ||mixer|| = √(1 + P) at every resolution.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.measure import register_flops
from vitscale.models.mixers.fourier_settings import FourierSettings  # noqa: F401 (resume: older pickles name it here)
from vitscale.models.mixers.grid import prefix_count


def _fft_flops(x_shape, dim, *args, out_shape=None, **kwargs) -> int:
    """5·n·log2(n) per transformed signal of n points (the Cooley-Tukey count)."""
    n = math.prod(x_shape[d] for d in dim)
    return int(5 * n * math.log2(n) * (math.prod(x_shape) // n)) if n > 1 else 0


for _op in (torch.ops.aten._fft_r2c, torch.ops.aten._fft_c2c):
    register_flops(_op, _fft_flops)


class Fourier(nn.Module):
    """Re(unitary DFT) over the grid (and optionally channels); prefix tokens get the DC term."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.channels = config.settings("fourier").channels
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, P + H·W, C), P prefix tokens first, grid tokens row-major."""
        b, t, c = x.shape
        gh, gw = grid_hw
        p = prefix_count(x, grid_hw, "fourier")
        grid = x[:, p:].reshape(b, gh, gw, c)
        dims = (1, 2, 3) if self.channels else (1, 2)
        exact = grid if grid.dtype in (torch.float32, torch.float64) else grid.float()  # no bf16 FFTs
        mixed = torch.fft.fftn(exact, dim=dims, norm="ortho").real.to(x.dtype).reshape(b, gh * gw, c)
        if not p:
            return mixed
        return torch.cat([mixed[:, :1].expand(b, p, c), mixed], dim=1)  # the (0, 0) bin: the DC term

    def lipschitz_bound(self, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> float:
        """Exactly √(1 + P) (see the module docstring); independent of the grid."""
        return math.sqrt(1 + prefix_tokens)

    def extra_repr(self) -> str:
        return f"channels={self.channels}"
