"""`model.fourier`: the Fourier (FNet) mixer's settings (its class: fourier.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class FourierSettings(BaseModel):
    """`model.fourier`: which axes are transformed."""

    model_config = ConfigDict(extra="forbid")

    channels: bool = Field(False, description="also transform over channels, as FNet (default: grid only)")
