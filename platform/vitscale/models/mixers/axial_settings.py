"""`model.axial`: the axial-attention mixer's settings (its class: axial.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class AxialSettings(BaseModel):
    """`model.axial`: which axis comes first, and the optional stabiliser."""

    model_config = ConfigDict(extra="forbid")

    order: Literal["rows_first", "columns_first"] = Field(
        "rows_first", description="attend along rows then columns, or the reverse"
    )
    qk_norm: bool = Field(
        False, description="LayerNorm on queries and keys per head (its own stabiliser; off unless set)"
    )
