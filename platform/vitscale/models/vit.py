"""The Vision Transformer around a mixer: patch embedding, blocks (via a regime), head.

Layout and initialisation follow timm's VisionTransformer (cls token, learned absolute
position embedding, pre-norm blocks with LayerNorm eps 1e-6, GELU MLP, final norm, head
on the cls token), so an attention model at ViT-Ti/S/B sizes is the standard one.
Any input size divisible by the patch size works without rebuilding: the position
embedding is resampled bicubically to the new grid (as timm's resample_abs_pos_embed)
and the mixers receive the grid shape with every call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.registry import MIXERS, REGIMES

NORM_EPS = 1e-6


class Mlp(nn.Module):
    """Token-wise MLP: Linear, GELU, Linear."""

    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(width, hidden)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(hidden, width)

    def forward(self, x: Tensor) -> Tensor:
        return self.fc2(self.act(self.fc1(x)))


class Block(nn.Module):
    """Pre-norm transformer block around a given mixer.

    `residual(x)` is the block's residual branches, f(x) = a + mlp(norm2(x + a)) with
    a = mixer(norm1(x)); `forward(x) = x + f(x)`. Since x + f(x) is exactly the usual
    x' = x + a, x'' = x' + mlp(norm2(x')), a block is one explicit Euler step of size 1 of
    dx/dt = f(x): that is the vector field the ODE regime integrates.
    """

    def __init__(self, config: ModelConfig, mixer: nn.Module) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.mixer = mixer
        self.norm2 = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.mlp = Mlp(config.width, int(config.width * config.mlp_ratio))

    def residual(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        a = self.mixer(self.norm1(x), grid_hw)
        return a + self.mlp(self.norm2(x + a))

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        return x + self.residual(x, grid_hw)


def resample_pos_embed(pos: Tensor, old_hw: tuple[int, int], new_hw: tuple[int, int], prefix: int) -> Tensor:
    """Bicubic (antialiased) resampling of the grid part of a (1, P + h·w, C) embedding."""
    if old_hw == new_hw:
        return pos
    c = pos.shape[-1]
    grid = pos[:, prefix:].reshape(1, *old_hw, c).permute(0, 3, 1, 2).float()
    grid = F.interpolate(grid, size=new_hw, mode="bicubic", antialias=True, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, new_hw[0] * new_hw[1], c).to(pos.dtype)
    return torch.cat([pos[:, :prefix], grid], dim=1)


class VisionTransformer(nn.Module):
    """Images (B, C, H, W) -> logits (B, num_classes); H and W any multiples of the patch size."""

    num_prefix_tokens = 1  # the cls token

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.config = config
        mixer_cls = MIXERS[config.mixer]
        self.patch_size = config.patch_size
        self.build_grid = config.grid
        self.patch_embed = nn.Conv2d(config.in_chans, config.width, config.patch_size, config.patch_size)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, config.width))
        use_pos = mixer_cls.wants_pos_embed if config.pos_embed is None else config.pos_embed
        tokens = self.num_prefix_tokens + self.build_grid[0] * self.build_grid[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, config.width)) if use_pos else None
        self.blocks = REGIMES[config.regime](config, lambda: Block(config, mixer_cls(config)))
        self.norm = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.head = nn.Linear(config.width, config.num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """timm's ViT init: truncated-normal(0.02) linears and position embedding, tiny cls."""
        if self.pos_embed is not None:
            nn.init.trunc_normal_(self.pos_embed, std=0.02)
        nn.init.normal_(self.cls_token, std=1e-6)
        for module in self.modules():
            if isinstance(module, nn.Linear):
                nn.init.trunc_normal_(module.weight, std=0.02)
                if module.bias is not None:
                    nn.init.zeros_(module.bias)

    @property
    def last_nfe(self) -> int | None:
        """Vector-field evaluations of the latest forward (ODE regime); None otherwise."""
        return self.blocks.last_nfe

    def grid_for(self, height: int, width: int) -> tuple[int, int]:
        """Token grid of an input size; rejects sizes the patch embedding would crop."""
        p = self.patch_size
        if height % p or width % p:
            raise ValueError(f"input size {height}x{width} is not divisible by the patch size {p}")
        return height // p, width // p

    def embed(self, images: Tensor) -> tuple[Tensor, tuple[int, int]]:
        """Images -> tokens (B, 1 + H·W, C) with cls token and position embedding, and the grid."""
        grid_hw = self.grid_for(images.shape[-2], images.shape[-1])
        x = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)
        if self.pos_embed is not None:
            x = x + resample_pos_embed(self.pos_embed, self.build_grid, grid_hw, self.num_prefix_tokens)
        return x, grid_hw

    def forward(self, images: Tensor) -> Tensor:
        x, grid_hw = self.embed(images)
        x = self.norm(self.blocks(x, grid_hw))
        return self.head(x[:, 0])


def build(config: ModelConfig | Mapping[str, Any]) -> VisionTransformer:
    """The model a config describes (a mapping is validated into a ModelConfig first)."""
    if not isinstance(config, ModelConfig):
        config = ModelConfig.model_validate(config)
    return VisionTransformer(config)
