"""`model.attention`: the attention mixer's settings (its class: attention.py)."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field


class AttentionSettings(BaseModel):
    """`model.attention`: how attention is computed, and its optional stabiliser."""

    model_config = ConfigDict(extra="forbid")
    moved_from: ClassVar[dict[str, str]] = {"attention_backend": "backend", "qk_norm": "qk_norm"}

    backend: Literal["auto", "sdpa", "math"] = Field(
        "auto",
        description="fused F.scaled_dot_product_attention, explicit N x N weights, or auto: sdpa except "
        "under bfloat16 autocast on the CPU, where torch's fused kernel trains 3.5x slower than math",
    )
    qk_norm: bool = Field(
        False,
        description="LayerNorm on queries and keys per head (attention's own stabiliser; off in every "
        "regime unless set or searched)",
    )
