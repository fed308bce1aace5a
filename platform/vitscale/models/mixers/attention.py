"""Softmax self-attention, the baseline every SSoG claim is measured against.

Two backends with the same weights: `sdpa` (F.scaled_dot_product_attention, the fused
kernel a fair baseline must use) and `math` (the N x N weights materialised, so the
quadratic memory and FLOPs are visible and the weights can be inspected). `auto`, the default,
takes the faster for the forward at hand: sdpa, except under bfloat16 autocast on the CPU, where
torch 2.13's fused kernel took 382 ms for a training step that math did in 108 (width 64, 7x7
tokens, batch 128, one core; `vitscale bench --mode train --dtype bfloat16`, issue 35).
Parameters match timm's `Attention` (qkv with bias, proj), so ViT-Ti/S/B built with this
mixer have the standard parameter counts. Optional QK-norm (`model.attention.qk_norm`; Dehghani et
al. 2023, ViT-22B; timm's `qk_norm`): a LayerNorm over each head's queries and keys bounds
the attention logits, which otherwise sharpen fast when one block is applied many times
(looped and ODE regimes); it adds 4·head_dim parameters per mixer. It is off by default in every
regime: it is attention's own stabiliser, so a comparison searches it inside the attention arm,
as SSoG's arm searches its own knobs (`model.ssog`); no regime default favours one arm.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.mixers.attention_settings import AttentionSettings  # noqa: F401 (resume: older pickles name it here)


class Attention(nn.Module):
    """Multi-head self-attention over all tokens (prefix tokens included)."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.width, self.build_grid = config.width, config.grid  # the mixer contract (measure)
        self.heads = config.heads
        self.head_dim = config.width // config.heads
        self.scale = self.head_dim**-0.5
        self.backend = config.settings("attention").backend
        self.qkv = nn.Linear(config.width, 3 * config.width)
        qk_norm = config.settings("attention").qk_norm
        self.q_norm = nn.LayerNorm(self.head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.k_norm = nn.LayerNorm(self.head_dim, eps=1e-6) if qk_norm else nn.Identity()
        self.proj = nn.Linear(config.width, config.width)

    def _fused(self, x: Tensor) -> bool:
        """Whether this forward uses F.scaled_dot_product_attention (`backend`, auto decided here)."""
        if self.backend != "auto":
            return self.backend == "sdpa"
        return not (x.device.type == "cpu" and torch.is_autocast_enabled("cpu"))

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        """x: (B, T, C) tokens; grid_hw is unused (attention ignores geometry)."""
        b, t, c = x.shape
        qkv = self.qkv(x).reshape(b, t, 3, self.heads, self.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)  # (B, heads, T, d) each
        q, k = self.q_norm(q), self.k_norm(k)
        if self._fused(x):
            out = F.scaled_dot_product_attention(q, k, v)
        else:
            weights = torch.softmax((q * self.scale) @ k.transpose(-2, -1), dim=-1)  # (B, h, T, T)
            out = weights @ v
        return self.proj(out.transpose(1, 2).reshape(b, t, c))
