"""`TrainConfig` (the recipe) and `TrialConfig` (model + data + recipe: one trial)."""

from __future__ import annotations

import functools
import json
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vitscale.data.config import DataConfig
from vitscale.data.registry import recommended_recipe
from vitscale.models.config import ModelConfig
from vitscale.precision import resolve_precision
from vitscale.train.hyper_schedule import ScheduleStep

# Used where neither the trial nor the data set's recommended recipe sets a value.
GENERIC_RECIPE: dict[str, Any] = {
    "epochs": 10,
    "batch_size": 128,
    "lr": 1e-3,
    "warmup_epochs": 1.0,
    "label_smoothing": 0.1,
}
_RECIPE_NOTE = "default: the data set's recommended recipe, else "


SAME = "same"  # a `where:` value meaning "this trial's own value" (one teacher per mixer, say)


def _get_in(data: Any, path: str) -> Any:
    for part in path.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


class TeacherRef(BaseModel):
    """`train.distill.teacher: {best_of: STUDY, where: {...}}`: the best trial of an earlier study.

    Resolved through MLflow when a study starts (`vitscale.train.from_mlflow.resolve_best_of`): among
    that study's finished trials whose params match `where`, the one with the best final
    `val_top1` (validation, never test). A `where` value `same` takes the trial's own value, so one
    file distils each mixer from its own discrete teacher; the table of resolved teachers is kept
    in `resolved` (key: the JSON list of the trial's `same` values) and recorded in the spec.
    """

    model_config = ConfigDict(extra="forbid")

    best_of: str = Field(description="name of the study (MLflow experiment) that trained the teachers")
    where: dict[str, Any] = Field(
        default_factory=dict,
        description="params the teacher's run must have ({model.regime: discrete}); `same` = the trial's value",
    )
    resolved: dict[str, dict[str, str]] | None = Field(
        None, description="set at study start: same-values -> {path, run_id}; do not write by hand"
    )

    def same_keys(self) -> list[str]:
        return [k for k, v in self.where.items() if v == SAME]


class DistillConfig(BaseModel):
    """`train.distill`: ODE-ViT trajectory distillation (see `vitscale.train.distill`).

    loss = CE + λ(step) · mean_k err(x(t_k), h_k) [+ logit_weight · T² · KL(teacher ‖ student)]
    with t_k = k · t_end / depth and err the per-token relative squared error ‖x − h‖² / ‖h‖²,
    averaged over tokens (cls included), images and the chosen k. weight 0 and logit_weight 0 =
    off (the teacher is not even loaded): a `train.distill.weight` choice of 0 is the scratch arm.
    """

    model_config = ConfigDict(extra="forbid")

    teacher: str | TeacherRef | None = Field(
        None,
        description="checkpoint file or folder, MLflow run id, runs:/ID or models:/NAME/VERSION URI, "
        "or {best_of: STUDY, where: {...}}",
    )
    teacher_run_id: str | None = Field(
        None, description="the MLflow run the teacher came from (set when resolved)"
    )
    weight: float = Field(
        1.0, ge=0, description="λ of the trajectory term (per-token relative squared error)"
    )
    layers: Literal["all"] | list[int] = Field(
        "all", description="teacher blocks k matched at t_k: all | [k, ...]"
    )
    schedule: Literal["constant", "linear_decay"] = Field(
        "constant", description="λ over training: constant, or linear from λ to 0 over the epochs"
    )
    logit_weight: float = Field(
        0.0, ge=0, description="weight of KL(teacher logits ‖ student logits); 0 = off"
    )
    temperature: float = Field(1.0, gt=0, description="softmax temperature of the logit term")

    @property
    def active(self) -> bool:
        return self.weight > 0 or self.logit_weight > 0

    @model_validator(mode="after")
    def _teacher_when_active(self) -> DistillConfig:
        """Refused up front, not as a failure of every trial that would distil from nothing."""
        if self.active and self.teacher is None:
            raise ValueError(
                "teacher: required when weight or logit_weight > 0 (a checkpoint, MLflow run id, "
                "models:/ URI or {best_of: STUDY}); weight 0 trains from scratch"
            )
        return self

    def layer_list(self, depth: int) -> list[int]:
        return list(range(1, depth + 1)) if self.layers == "all" else sorted(set(self.layers))


# The old boolean `train.amp` ("bf16 autocast on CUDA, ignored on CPU") in `precision` terms.
AMP_AS_PRECISION = {True: "auto", False: "float32"}
AMP_MOVED = (
    "train.amp: replaced by train.precision (amp: true = precision: auto, amp: false = precision: float32)"
)


class TrainConfig(BaseModel):
    """The recipe. Fields of GENERIC_RECIPE left unset (None) are filled by `TrialConfig.resolved`."""

    model_config = ConfigDict(extra="forbid")

    @model_validator(mode="after")
    def _curve_needs_test(self) -> TrainConfig:
        if self.test_curve and not self.evaluate_test:
            raise ValueError(
                "train.test_curve needs train.evaluate_test: true (the curve ends at the test pass)"
            )
        return self

    @model_validator(mode="after")
    def _budget_sets_the_epochs(self) -> TrainConfig:
        if self.train_flops is not None and self.epochs is not None:
            raise ValueError(
                "train.train_flops sets how long the trial trains (train_flops / training FLOPs per "
                "image = images seen); remove train.epochs, or remove train.train_flops"
            )
        return self

    @model_validator(mode="before")
    @classmethod
    def _amp_is_precision(cls, values: Any) -> Any:
        """`amp: true|false` (older study files, checkpoints and MLflow runs) reads as the precision
        it meant, so their trials rerun as they ran; beside `precision` it is refused."""
        if not isinstance(values, dict) or "amp" not in values:
            return values
        values = dict(values)
        amp = values.pop("amp")
        if "precision" in values or amp not in AMP_AS_PRECISION:
            raise ValueError(f"{AMP_MOVED}; give only precision")
        return {**values, "precision": AMP_AS_PRECISION[amp]}

    epochs: int | None = Field(None, ge=1, description=_RECIPE_NOTE + "10; unset beside train_flops")
    train_flops: float | None = Field(
        None,
        gt=0,
        description="a training budget in FLOPs (forward + backward, as the metric train_flops counts "
        "them) in place of epochs: the trial trains on train_flops / (training FLOPs per image) "
        "images, passing over the training set as often as that takes (the last pass partial), the "
        "lr schedule spanning exactly those steps. An isoFLOP study sets it per arm, so each model "
        "size sees the images its budget buys (ODE: at the NFE of the untrained model)",
    )
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
    precision: Literal["auto", "float32", "bfloat16"] = Field(
        "auto",
        description="forward precision of training and evaluation: bfloat16 = autocast (parameters, "
        "gradients, optimizer state and loss stay float32) on CPU or CUDA; auto = bfloat16 on CUDA and "
        "on CPUs with native bf16 (AVX512-BF16, AMX), else float32; recorded as run (auto resolved)",
    )
    compile: bool = Field(
        False,
        description="torch.compile what repeats: the regime's stack of blocks, or one ODE field evaluation "
        "(vitscale.models.regions)",
    )
    evaluate_test: bool = Field(
        True,
        description="evaluate test (metrics test_*, per-image predictions) once the last epoch ends; a "
        "comparison's tuning and confirmation trials turn it off: selection reads validation only, and "
        "the 10,000-image pass was their largest cost beside the epochs",
    )
    test_curve: bool = Field(
        False,
        description="also evaluate test after every epoch (metric curve_test_top1): the learning curves "
        "of a report; reported only, nothing selects on it; the final phase of a comparison turns it on",
    )
    threads: int | None = Field(None, ge=1, description="torch CPU threads; default: the trial's CPUs")
    schedule: list[ScheduleStep] | None = Field(
        None,
        description="values that change while the trial trains, from the given epochs on: "
        "[{epoch: 1, values: {train.lr: 3.0e-3}}, {epoch: 4, values: {train.lr: 3.6e-3}}] (the peak "
        "lr moves, the warmup-cosine factor goes on); a population-based member's schedule, as its "
        "run records it and a comparison's final phase replays it",
    )
    distill: DistillConfig | None = Field(
        None, description="trajectory distillation from a trained teacher (ODE students); null = off"
    )
    eval_resolutions: list[Annotated[int, Field(ge=4)]] | None = Field(
        None,
        min_length=1,
        description="also evaluate the finished model on val and test at these image sides (multiples of "
        "model.patch_size; position embedding resampled): metrics val_top1_at<R>, test_top1_at<R>, "
        "predictions/test@<R>.parquet; only reported, nothing selects on them",
    )

    def length(self) -> str:
        """'8 epochs' or 'train_flops 1.2e+12' (a budget: its epochs are known once the model is built)."""
        return f"{self.epochs} epochs" if self.train_flops is None else f"train_flops {self.train_flops:.3g}"


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

    @model_validator(mode="after")
    def _resolutions_fit_the_patch(self) -> TrialConfig:
        """Other resolutions keep the patch size: each must give a whole token grid."""
        for key, values in (
            ("data.train_resolutions", self.data.train_resolutions),
            ("train.eval_resolutions", self.train.eval_resolutions),
        ):
            problem = resolutions_problem(values or (), self.model.patch_size, "model.patch_size")
            if problem:
                raise ValueError(f"{key}: {problem}")
        return self

    @model_validator(mode="after")
    def _pick_resolved_teacher(self) -> TrialConfig:
        """A `best_of` teacher resolved at study start: this trial's entry becomes its teacher."""
        distill = self.train.distill
        ref = distill.teacher if distill is not None else None
        if not isinstance(ref, TeacherRef) or ref.resolved is None:
            return self
        values = self.model_dump(mode="json")
        key = json.dumps([_get_in(values, k) for k in ref.same_keys()])
        entry = ref.resolved.get(key)
        if entry is None:
            raise ValueError(
                f"train.distill.teacher: study {ref.best_of!r} has no finished teacher for "
                f"{dict(zip(ref.same_keys(), json.loads(key), strict=True))} (has: {sorted(ref.resolved)})"
            )
        distill = distill.model_copy(update={"teacher": entry["path"], "teacher_run_id": entry["run_id"]})
        return self.model_copy(update={"train": self.train.model_copy(update={"distill": distill})})

    def resolved(self) -> TrialConfig:
        """This trial with every unset recipe value filled: the data set's recommendation, else
        GENERIC_RECIPE. Done per trial (not in validation) so a study whose points change the
        data set gets each data set's own recipe. Idempotent."""
        recipe = {**GENERIC_RECIPE, **recommended_recipe(self.data.dataset)}
        if self.train.train_flops is not None:  # the budget sets the epochs (train.budget)
            recipe.pop("epochs")
        unset = {k: v for k, v in recipe.items() if getattr(self.train, k, None) is None}
        if not unset:
            return self
        return self.model_copy(update={"train": self.train.model_copy(update=unset)})

    def with_precision(self, device_type: str) -> TrialConfig:
        """This trial with `train.precision: auto` resolved for a device type (`cuda` -> bfloat16,
        else float32; `vitscale.precision`), as it runs and as MLflow records it."""
        precision = resolve_precision(self.train.precision, device_type)
        if precision == self.train.precision:
            return self
        return self.model_copy(update={"train": self.train.model_copy(update={"precision": precision})})


def resolutions_problem(resolutions, patch_size: int, patch_name: str) -> str | None:
    """Why image sides cannot keep the patch size (not positive multiples of it), or None: the
    token grid would crop. One wording for `TrialConfig` and `vitscale evaluate`."""
    bad = [r for r in resolutions if r <= 0 or r % patch_size]
    if not bad:
        return None
    verb = "is" if len(bad) == 1 else "are"
    return f"{', '.join(map(str, bad))} {verb} not divisible by {patch_name} {patch_size}; use multiples of {patch_size}"


def flatten(trial: TrialConfig) -> dict[str, Any]:
    """{'model.width': 64, 'train.betas': '[0.9, 0.999]', ...}: MLflow params, analysis columns.

    Values are None, bool, int, float or str; sequences become JSON strings. The model's choices
    left to its mixer or regime are shown resolved (`ModelConfig.resolved`).
    """
    out: dict[str, Any] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{prefix}.{k}" if prefix else k, v)
        elif isinstance(value, list | tuple):
            out[prefix] = json.dumps(value)
        else:
            out[prefix] = value

    data = trial.model_dump(mode="json")
    data["model"].update(trial.model.resolved().model_dump(mode="json", include={"pos_embed", "layer_scale"}))
    walk("", data)
    return out


def logged_params(trial: TrialConfig) -> dict[str, Any]:
    """`flatten` as MLflow logs it: without the values left unset (None) where unset is the default
    (data.hflip, model.head_dim, train.distill...), so no param reads 'None' and a missing key means
    the default, for `train --from-run` (which rebuilds the trial from the params) and the analysis
    alike. A None that is not the default (train.grad_clip: null, no clipping) is kept."""
    defaults = _default_params()
    return {k: v for k, v in flatten(trial).items() if v is not None or defaults.get(k) is not None}


@functools.cache
def _default_params() -> dict[str, Any]:
    """The params of a trial left entirely to its defaults (a key inside an optional section, absent
    here, defaults to None)."""
    return flatten(TrialConfig())
