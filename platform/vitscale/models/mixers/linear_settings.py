"""`model.linear`: the linear-attention mixer's settings (its class: linear.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class LinearSettings(BaseModel):
    """`model.linear`: the normaliser's guard."""

    model_config = ConfigDict(extra="forbid")

    eps: float = Field(1e-6, gt=0, description="added to the normaliser φ(q)·Σφ(k) (it is > 0 anyway)")
