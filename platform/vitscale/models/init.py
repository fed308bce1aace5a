"""How a ViT's weights start (`model.init`), looked up by name in INITS.

- `scaled` (the default): linear weights truncated-normal with std 1/sqrt(3 * fan_in) — PyTorch's
  default variance, equal to timm's 0.02 at width 768 and 3.6x it at width 64 — and the position
  embedding started as a 2-D sine-cosine code of the token grid (MAE; learned from there). At the
  small widths a CPU study trains, 0.02 makes every residual branch ~0 and the position signal
  30x weaker than the patch content, so a model spends its first epochs growing them: 1 epoch on
  6,000 Fashion-MNIST images gave 34 % test with `timm`, 54 % with `scaled` (docs/results.md, issue 35).
- `timm`: timm's VisionTransformer, truncated-normal(0.02) linears and position embedding, for
  runs that must start exactly as timm's models do (and runs logged before `model.init` existed).
Both zero the linear biases and start the cls token at ~0 (std 1e-6).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn


def sincos_grid(grid_hw: tuple[int, int], width: int) -> torch.Tensor:
    """(H*W, width) 2-D sine-cosine code: a quarter of the channels each for sin/cos of the column
    and of the row at geometric frequencies (MAE's 2-D code); odd leftovers stay 0."""
    quarter = width // 4
    out = torch.zeros(grid_hw[0] * grid_hw[1], width)
    if quarter == 0:
        return out
    omega = 1.0 / 10000 ** (torch.arange(quarter, dtype=torch.float64) / quarter)
    rows, cols = torch.meshgrid(
        torch.arange(grid_hw[0], dtype=torch.float64),
        torch.arange(grid_hw[1], dtype=torch.float64),
        indexing="ij",
    )
    x, y = cols.reshape(-1, 1) * omega, rows.reshape(-1, 1) * omega
    out[:, : 4 * quarter] = torch.cat([x.sin(), x.cos(), y.sin(), y.cos()], dim=1).float()
    return out


def _linears(model: nn.Module, std_of: Callable[[nn.Linear], float]) -> None:
    for module in model.modules():
        if isinstance(module, nn.Linear):
            nn.init.trunc_normal_(module.weight, std=std_of(module))
            if module.bias is not None:
                nn.init.zeros_(module.bias)


@torch.no_grad()
def init_scaled(model: nn.Module) -> None:
    _linears(model, lambda m: 1.0 / math.sqrt(3 * m.in_features))
    if model.pos_embed is not None:
        prefix = model.num_prefix_tokens
        model.pos_embed[:, :prefix].zero_()
        model.pos_embed[0, prefix:] = sincos_grid(model.build_grid, model.pos_embed.shape[-1])
    nn.init.normal_(model.cls_token, std=1e-6)


@torch.no_grad()
def init_timm(model: nn.Module) -> None:
    _linears(model, lambda m: 0.02)
    if model.pos_embed is not None:
        nn.init.trunc_normal_(model.pos_embed, std=0.02)
    nn.init.normal_(model.cls_token, std=1e-6)


INITS: dict[str, Callable[[nn.Module], None]] = {"scaled": init_scaled, "timm": init_timm}
