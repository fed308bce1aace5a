"""`TrainConfig` (the recipe) and `TrialConfig` (model + data + recipe: one trial)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vitscale.data.config import DataConfig
from vitscale.data.registry import recommended_recipe
from vitscale.models.config import ModelConfig

# Used where neither the trial nor the data set's recommended recipe sets a value.
GENERIC_RECIPE: dict[str, Any] = {
    "epochs": 10,
    "batch_size": 128,
    "lr": 1e-3,
    "warmup_epochs": 1.0,
    "label_smoothing": 0.1,
}
_RECIPE_NOTE = "default: the data set's recommended recipe, else "


class TrainConfig(BaseModel):
    """The recipe. Fields of GENERIC_RECIPE left unset (None) are filled by `TrialConfig.resolved`."""

    model_config = ConfigDict(extra="forbid")

    epochs: int | None = Field(None, ge=1, description=_RECIPE_NOTE + "10")
    batch_size: int | None = Field(None, ge=1, description=_RECIPE_NOTE + "128")
    eval_batch_size: int | None = Field(None, ge=1, description="default: 2 x batch_size")
    lr: float | None = Field(None, gt=0, description="peak learning rate of AdamW; " + _RECIPE_NOTE + "1e-3")
    min_lr_ratio: float = Field(0.01, ge=0, le=1, description="cosine floor as a share of lr")
    weight_decay: float = Field(0.05, ge=0)
    betas: tuple[float, float] = (0.9, 0.999)
    warmup_epochs: float | None = Field(
        None, ge=0, description="linear warmup length (fractions allowed); " + _RECIPE_NOTE + "1"
    )
    label_smoothing: float | None = Field(None, ge=0, lt=1, description=_RECIPE_NOTE + "0.1")
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

    def resolved(self) -> TrialConfig:
        """This trial with every unset recipe value filled: the data set's recommendation, else
        GENERIC_RECIPE. Done per trial (not in validation) so a study whose points change the
        data set gets each data set's own recipe. Idempotent."""
        recipe = {**GENERIC_RECIPE, **recommended_recipe(self.data.dataset)}
        unset = {k: v for k, v in recipe.items() if getattr(self.train, k, None) is None}
        if not unset:
            return self
        return self.model_copy(update={"train": self.train.model_copy(update=unset)})
