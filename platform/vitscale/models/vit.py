"""The Vision Transformer around a mixer: patch embedding, blocks (via a regime), head.

Layout and initialisation follow timm's VisionTransformer (cls token, learned absolute
position embedding, pre-norm blocks with LayerNorm eps 1e-6, GELU MLP, final norm, head
on the cls token), so an attention model at ViT-Ti/S/B sizes is the standard one.
Any input size divisible by the patch size works without rebuilding: the position
embedding is resampled bicubically to the new grid (as timm's resample_abs_pos_embed)
and the mixers receive the grid shape with every call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vitscale.models.config import ModelConfig
from vitscale.models.init import INITS
from vitscale.models.kernel_cache import kernel_cache_scope
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


class LayerScale(nn.Module):
    """A learned per-channel gain on a residual branch (CaiT, Touvron et al. 2021)."""

    def __init__(self, width: int, init: float) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.full((width,), float(init)))

    def forward(self, x: Tensor) -> Tensor:
        return x * self.gamma


class Block(nn.Module):
    """Pre-norm transformer block around a given mixer.

    `residual(x)` is the block's residual branches, f(x) = a + ls2(mlp(norm2(x + a))) with
    a = ls1(mixer(norm1(x))) (ls = LayerScale, or the identity when it is off);
    `forward(x) = x + f(x)`. Since x + f(x) is exactly the usual
    x' = x + a, x'' = x' + mlp(norm2(x')), a block is one explicit Euler step of size 1 of
    dx/dt = f(x): that is the vector field the ODE regime integrates.
    """

    def __init__(self, config: ModelConfig, mixer: nn.Module) -> None:
        super().__init__()
        scale = config.resolved_layer_scale
        self.norm1 = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.mixer = mixer
        self.ls1 = LayerScale(config.width, scale) if scale else nn.Identity()
        self.norm2 = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.mlp = Mlp(config.width, int(config.width * config.mlp_ratio))
        self.ls2 = LayerScale(config.width, scale) if scale else nn.Identity()

    def residual(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        a = self.ls1(self.mixer(self.norm1(x), grid_hw))
        return a + self.ls2(self.mlp(self.norm2(x + a)))

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
        use_pos = config.resolved_pos_embed
        tokens = self.num_prefix_tokens + self.build_grid[0] * self.build_grid[1]
        self.pos_embed = nn.Parameter(torch.zeros(1, tokens, config.width)) if use_pos else None
        self.blocks = REGIMES[config.regime](config, lambda: Block(config, mixer_cls(config)))
        self.norm = nn.LayerNorm(config.width, eps=NORM_EPS)
        self.head = nn.Linear(config.width, config.num_classes)
        self._init_weights()

    def _init_weights(self) -> None:
        """`model.init` (vitscale.models.init). A model on the meta device has shapes only (what
        `measure` counts on): nothing to draw, and the meta erfinv of trunc_normal_ would import
        torch's reference ops, 1.3 s of CPU."""
        if self.cls_token.is_meta:
            return
        INITS[self.config.init](self)

    @property
    def last_nfe(self) -> int | None:
        """Vector-field evaluations of the latest forward (ODE regime); None otherwise."""
        return self.blocks.last_nfe

    @property
    def nfe_count(self) -> int | None:
        """Vector-field evaluations so far, adjoint backward solves included (ODE); None otherwise."""
        return getattr(self.blocks, "nfe_count", None)

    def no_weight_decay(self) -> set[str]:
        """Names of the parameters AdamW must not decay: biases and norm/LayerScale gains (1-D),
        the position embedding and cls token (as timm), and whatever a part declares through its
        own `no_weight_decay()` (SSoG: its kernel parameters). Decay is for weight matrices."""
        names = {"cls_token"} | ({"pos_embed"} if self.pos_embed is not None else set())
        names |= {name for name, p in self.named_parameters() if p.ndim <= 1}
        for prefix, module in self.named_modules():
            if module is not self and hasattr(module, "no_weight_decay"):
                own = dict(module.named_parameters(recurse=False))
                names |= {f"{prefix}.{n}" for n in module.no_weight_decay() if own.get(n) is not None}
        return names

    def lr_scales(self) -> dict[str, float]:
        """Learning-rate multipliers the parts declare through their own `lr_scale()` (SSoG: its
        kernel widths and offsets); every other parameter trains at the recipe's lr (1.0)."""
        scales: dict[str, float] = {}
        for prefix, module in self.named_modules():
            if module is not self and hasattr(module, "lr_scale"):
                own = dict(module.named_parameters(recurse=False))
                scales |= {
                    f"{prefix}.{n}": float(v) for n, v in module.lr_scale().items() if own.get(n) is not None
                }
        return scales

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
        with kernel_cache_scope(self):  # mixers' kept kernels: checked once for this forward
            x, grid_hw = self.embed(images)
            x = self.norm(self.blocks(x, grid_hw))
            return self.head(x[:, 0])

    def forward_states(self, images: Tensor, layers: Sequence[int]) -> tuple[Tensor, Tensor]:
        """(logits, token states (len(layers), B, T, C)) with the states before the final norm:
        after block k for discrete and looped models, x(t_k) at t_k = k · t_end / depth for ODE
        models (one solve: the t_k join odeint's output grid, see `NeuralOde.trajectory`). The
        logits are those of `forward`."""
        with kernel_cache_scope(self):
            x, grid_hw = self.embed(images)
            regime, depth = self.blocks, self.config.depth
            if hasattr(regime, "trajectory"):
                x, states = regime.trajectory(x, grid_hw, regime.layer_times(layers, depth))
            else:
                blocks = list(regime.blocks) if hasattr(regime, "blocks") else [regime.block] * depth
                after = {}
                for k, block in enumerate(blocks, start=1):
                    x = block(x, grid_hw)
                    after[k] = x
                states = torch.stack([after[k] for k in layers])
            return self.head(self.norm(x)[:, 0]), states


def build(config: ModelConfig | Mapping[str, Any]) -> VisionTransformer:
    """The model a config describes (a mapping is validated into a ModelConfig first)."""
    if not isinstance(config, ModelConfig):
        config = ModelConfig.model_validate(config)
    return VisionTransformer(config)
