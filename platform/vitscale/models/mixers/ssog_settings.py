"""`model.ssog`: the SSoG mixer's settings and the rule they must meet on a grid (its class: ssog.py)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from vitscale.models.config import ModelConfig


class SSoGSettings(BaseModel):
    """`model.ssog`: the size and freedom of each head's Gaussian mixture."""

    model_config = ConfigDict(extra="forbid")
    moved_from: ClassVar[dict[str, str]] = {"num_gaussians": "num_gaussians", "ssog_offsets": "offsets"}

    num_gaussians: int = Field(4, ge=1, le=1024, description="Gaussians per head and axis")
    offsets: bool = Field(True, description="learn Gaussian centre offsets")
    kernel_lr_scale: float = Field(
        10.0,
        gt=0,
        le=1000,
        description="learning-rate multiplier of the kernel widths and offsets: under Adam every "
        "parameter moves ~lr per step, a large step for a 0.02-scale weight and a tiny one for a "
        "log-width of order 1",
    )
    sigma_min_tokens: float = Field(
        0.5, gt=0, le=1 << 14, description="narrowest initial width, in tokens of the build grid"
    )
    sigma_max_grid: float = Field(
        1.0, gt=0, le=16, description="widest initial width, as a fraction of the build grid's side"
    )


def check_config(config: ModelConfig) -> None:
    """The initial widths must span a range on this grid: narrowest <= widest."""
    s: SSoGSettings = config.settings("ssog")
    side = min(config.grid)
    if s.sigma_min_tokens > s.sigma_max_grid * side:
        raise ValueError(
            f"ssog.sigma_min_tokens: {s.sigma_min_tokens} tokens is wider than ssog.sigma_max_grid "
            f"{s.sigma_max_grid} x the {side}-token grid side; lower it or raise sigma_max_grid"
        )
