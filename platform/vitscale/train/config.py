"""`TrainConfig` (the recipe) and `TrialConfig` (model + data + recipe: one trial)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vitscale.data.config import DataConfig
from vitscale.models.config import ModelConfig


class TrainConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epochs: int = Field(10, ge=1)
    batch_size: int = Field(128, ge=1)
    eval_batch_size: int | None = Field(None, ge=1, description="default: 2 x batch_size")
    lr: float = Field(1e-3, gt=0, description="peak learning rate of AdamW")
    min_lr_ratio: float = Field(0.01, ge=0, le=1, description="cosine floor as a share of lr")
    weight_decay: float = Field(0.05, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_epochs: float = Field(1.0, ge=0, description="linear warmup length (fractions allowed)")
    label_smoothing: float = Field(0.1, ge=0, lt=1)
    grad_clip: float | None = Field(1.0, gt=0, description="max global gradient norm; null = off")
    seed: int = Field(0, ge=0)
    device: str = Field("auto", description="auto | cpu | cuda | cuda:N")
    amp: bool = Field(True, description="bf16 autocast on CUDA (ignored on CPU)")
    compile: bool = Field(False, description="torch.compile the model")
    threads: int | None = Field(None, ge=1, description="torch CPU threads; default: the trial's CPUs")


class TrialConfig(BaseModel):
    """Everything one trial needs; a study's `trial:` block and every sampled point are this."""

    model_config = ConfigDict(extra="forbid")

    model: ModelConfig = Field(default_factory=ModelConfig)
    data: DataConfig = Field(default_factory=DataConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)

    @model_validator(mode="before")
    @classmethod
    def _image_size_from_resolution(cls, values: Any) -> Any:
        """The model is built at the data resolution: one number, set in `data.resolution`.

        Any YAML value may arrive here: anything but the expected shapes passes through
        untouched, for Pydantic to report as a type error under its own key.
        """
        if not isinstance(values, dict):
            return values
        data = values.get("data")
        if isinstance(data, DataConfig):
            resolution = data.resolution
        elif isinstance(data, dict):
            resolution = data.get("resolution")
        else:
            return values
        model = values.get("model")
        if resolution is None or isinstance(model, ModelConfig):
            return values
        if model is None:
            model = {}
        if not isinstance(model, dict):
            return values
        if "image_size" in model and model["image_size"] != resolution:
            raise ValueError(
                f"model.image_size: {model['image_size']} differs from data.resolution {resolution}; "
                "set only data.resolution"
            )
        return {**values, "model": {**model, "image_size": resolution}}
