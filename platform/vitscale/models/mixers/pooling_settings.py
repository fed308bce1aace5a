"""`model.pooling`: the pooling (MetaFormer) mixer's settings (its class: pooling.py)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from vitscale.models.config import MAX_IMAGE_SIZE


class PoolingSettings(BaseModel):
    """`model.pooling`: the pooling window."""

    model_config = ConfigDict(extra="forbid")

    pool_size: int = Field(3, ge=1, le=MAX_IMAGE_SIZE, description="side of the average-pooling window (odd)")

    @field_validator("pool_size")
    @classmethod
    def _odd(cls, value: int) -> int:
        if value % 2 == 0:
            raise ValueError(f"{value} is even; the window must be centred on its token (odd size)")
        return value
