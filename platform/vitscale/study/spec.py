"""`StudySpec`: the Pydantic model of a study file. Structure and types only.

Cross-field rules (space versus trial, objectives versus metrics, grid versus continuous...) live
in `vitscale.study.checks`, so that every problem of a file is reported at once instead of the
first failing validator hiding the rest. Defaults that depend on other fields (experiment name,
ASHA max_t, seeds, objectives) are filled in here, so consumers always see concrete values.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from vitscale.bench.config import BenchmarkConfig
from vitscale.kinds import STUDY_KINDS, study_kind
from vitscale.study.distributions import Param
from vitscale.tracking.layout import DEFAULT_TRACKING_URI
from vitscale.train.config import TrialConfig

NAME_PATTERN = r"^[a-z0-9][a-z0-9_-]*$"
DEFAULT_NUM_SAMPLES = 16
BUDGET_MAX_SAMPLES = 1000  # a compute budget's cap on points when search.num_samples is not given
# Search algorithms that stop their own points early -> the scheduler.type whose section they read
# (max_t, reduction_factor, grace_period); it is their default, any other type is refused
SEARCH_SCHEDULERS = {"bohb": "hyperband"}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


# population-based schedulers (pbt, pb2): defaults of options left unset (None keeps the spec's hash)
DEFAULT_PERTURBATION_INTERVAL = 1
DEFAULT_QUANTILE_FRACTION = 0.25
DEFAULT_RESAMPLE_PROBABILITY = 0.25
POPULATION_OPTIONS = (
    "perturbation_interval",
    "quantile_fraction",
    "resample_probability",
    "hyperparam_mutations",
)

DEFAULT_CONFIRM_TOP_K = 3  # a comparison tuned at search.fidelity confirms this many points per arm
MIN_CONFIRM_TOP_K = 3  # fewer points cannot show a ranking transfers (Spearman needs 3)


class ConfirmConfig(_Section):
    top_k: int = Field(
        DEFAULT_CONFIRM_TOP_K,
        ge=0,
        description=f"points per arm re-run at full fidelity (0 = off; else at least {MIN_CONFIRM_TOP_K})",
    )

    @field_validator("top_k")
    @classmethod
    def _enough_to_rank(cls, top_k: int) -> int:
        if 0 < top_k < MIN_CONFIRM_TOP_K:
            raise ValueError(
                f"{top_k} point(s) cannot show that the low-fidelity ranking transfers (a rank "
                f"correlation needs {MIN_CONFIRM_TOP_K}): give 0 (off) or {MIN_CONFIRM_TOP_K} or more"
            )
        return top_k


class BudgetConfig(_Section):
    """How much one search may spend: points, or compute (each comparison arm's search its own)."""

    trials: int | None = Field(None, ge=1, description="points the search draws (search.num_samples)")
    train_flops: float | None = Field(
        None,
        gt=0,
        description="training FLOPs (forward + backward, as trained) of all its trials; no new point "
        "is drawn once they are spent",
    )
    core_hours: float | None = Field(
        None,
        gt=0,
        description="trial wall time x resources.cpu of all its trials, in hours; no new point is "
        "drawn once they are spent",
    )

    @model_validator(mode="after")
    def _one_measure(self) -> BudgetConfig:
        given = [name for name in type(self).model_fields if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of trials, train_flops, core_hours (got {', '.join(given) or 'none'})"
            )
        return self

    @property
    def compute(self) -> tuple[str, float] | None:
        """(measure, amount) of a compute budget; None for a budget in trials."""
        for name in ("train_flops", "core_hours"):
            if getattr(self, name) is not None:
                return name, float(getattr(self, name))
        return None


class SearchConfig(_Section):
    algorithm: Literal["grid", "random", "tpe", "nsga2", "cmaes", "qmc", "gp", "bohb"] = Field(
        "grid",
        description="grid: every point of the space; the others are Optuna samplers (gp: Gaussian-"
        "process BO; bohb: TPE whose points Optuna's HyperbandPruner stops early per arm, reading "
        "scheduler's max_t, reduction_factor and grace_period)",
    )
    num_samples: int | None = Field(
        None, ge=1, description=f"points a sampler draws (default {DEFAULT_NUM_SAMPLES}); not for grid"
    )
    budget: BudgetConfig | None = Field(
        None,
        description="samplers: {trials: N} (= num_samples), or {train_flops: F} / {core_hours: H}: "
        "points are drawn until the search's trials have spent that much compute (num_samples, if "
        f"given, caps the points; default {BUDGET_MAX_SAMPLES}), so arms of different cost get equal "
        "compute",
    )
    seeds: list[int] | None = Field(
        None,
        min_length=1,
        description="replicates: each point runs once per seed; default [trial.train.seed]",
    )
    max_concurrent_trials: int | None = Field(None, ge=1, description="default: as many as resources allow")
    sampler_seed: int | None = Field(0, ge=0, description="seed of the Optuna sampler; null = random")
    optuna_storage: str | None = Field(
        None, description="Optuna RDB storage URI; default: a SQLite file beside the Ray results"
    )
    start_points: list[dict[str, Any]] | None = Field(
        None,
        description="samplers: configurations ({space key: value}) evaluated first (Optuna enqueue_trial)",
    )
    fidelity: dict[str, Any] | None = Field(
        None,
        description="comparison: trial values of the tuning phase only ({dotted trial path: value}, "
        "e.g. {data.num_train: 10000, train.epochs: 4}): each arm is tuned on this cheaper trial, "
        "its best point re-run at full fidelity in the final phase",
    )
    confirm: ConfirmConfig | None = Field(
        None,
        description=f"comparison with fidelity: each arm's top_k tuning points (validation) are re-run "
        "at full fidelity on the first of search.seeds, and the arm's configuration is chosen among "
        f"those runs; default top_k {DEFAULT_CONFIRM_TOP_K} whenever search.fidelity is set",
    )

    @model_validator(mode="after")
    def _points_once(self) -> SearchConfig:
        trials = self.budget.trials if self.budget is not None else None
        if trials is not None and self.num_samples is not None and trials != self.num_samples:
            raise ValueError(
                f"num_samples ({self.num_samples}) and budget.trials ({trials}) both give the number "
                "of points; keep one of them"
            )
        return self


class Objective(_Section):
    metric: str = Field(description="a metric the trainer reports (or a BENCH_METRICS for benchmarks)")
    mode: Literal["max", "min"] = "max"


class SchedulerConfig(_Section):
    type: Literal["fifo", "asha", "hyperband", "median", "pbt", "pb2"] = Field(
        "fifo",
        description="asha, hyperband, median stop poor trials early, comparing trials of one arm only; "
        "pbt, pb2 (population-based training) evolve each arm's population: every "
        "perturbation_interval epochs its worst members continue from a best member's checkpoint "
        "with changed values (pbt: perturbed or resampled; pb2: chosen by a Gaussian-process bandit)",
    )
    grace_period: int = Field(1, ge=1, description="asha, median: epochs every trial runs")
    reduction_factor: float = Field(
        3.0, gt=1, description="asha, hyperband: keep 1/reduction_factor per rung"
    )
    max_t: int | None = Field(
        None, ge=1, description="asha, hyperband: the last rung; default: trial.train.epochs"
    )
    min_samples_required: int = Field(
        3, ge=1, description="median: trials of the arm needed at an epoch before stopping any"
    )
    perturbation_interval: int | None = Field(
        None, ge=1, description=f"pbt, pb2: epochs between exploits (default {DEFAULT_PERTURBATION_INTERVAL})"
    )
    quantile_fraction: float | None = Field(
        None,
        gt=0,
        le=0.5,
        description="pbt, pb2: the share of the arm's population that exploits (the worst) and is "
        f"copied (the best) (default {DEFAULT_QUANTILE_FRACTION})",
    )
    resample_probability: float | None = Field(
        None,
        ge=0,
        le=1,
        description="pbt: chance that an exploit draws a value afresh from its distribution instead "
        f"of perturbing it (x0.8 or x1.2, a neighbouring choice) (default {DEFAULT_RESAMPLE_PROBABILITY})",
    )
    hyperparam_mutations: dict[str, Param] | None = Field(
        None,
        description="pbt, pb2: trial path -> distribution (as in space:) of the values an exploit may "
        "change, among those a trained model can carry on with (train.lr, train.weight_decay, "
        "train.label_smoothing, train.grad_clip); pb2: ranges only; default: those of the space",
    )


class ResourcesConfig(_Section):
    workers: int = Field(
        1,
        ge=1,
        description="processes per trial; above 1 a trial is a Ray Train TorchTrainer of that many "
        "data-parallel workers (DDP: gloo on CPU, NCCL on CUDA), each with cpu and gpu below; "
        "train.batch_size and train.lr stay the global ones",
    )
    cpu: float = Field(1.0, ge=0, description="CPUs per trial (per worker when workers > 1)")
    gpu: float = Field(
        0.0, ge=0, description="GPUs per trial (per worker when workers > 1); a fraction below 1 shares a GPU"
    )

    def per_trial(self) -> dict[str, float]:
        """What one trial holds in all: every worker's CPUs and GPUs."""
        return {"workers": self.workers, "cpu": self.workers * self.cpu, "gpu": self.workers * self.gpu}


class FailureConfig(_Section):
    max_failures: int = Field(1, ge=-1, description="restarts after a worker failure; -1 = unlimited")


class FinalConfig(_Section):
    seeds: list[int] = Field(
        min_length=1,
        description="comparison: each arm's best config is re-run once per seed, then tested; disjoint "
        "from search.seeds (a tuning seed's run is the selected maximum, not a fresh draw)",
    )


class MatchConfig(_Section):
    params: Literal["model.width", "model.mlp_ratio"] = Field(
        description="comparison: the model key set per arm so that its parameter count matches its "
        "reference arm's (width: a multiple of heads; mlp_ratio: any hidden width)"
    )
    tolerance: float = Field(0.02, gt=0, lt=1, description="largest relative difference in parameters")


class AnalysisConfig(_Section):
    throughput_from: str | None = Field(
        None,
        description="a benchmark study (MLflow experiment) of the same model configs: the accuracy-"
        "throughput front over resolutions places each (arm, resolution) at its measured images/s",
    )


class WandbConfig(_Section):
    project: str = Field(description="W&B project")
    mode: Literal["offline", "online"] = Field("offline", description="offline: run folders only, no network")


class TrackingConfig(_Section):
    uri: str = Field(DEFAULT_TRACKING_URI, description="MLflow tracking URI")
    experiment: str | None = Field(None, description="MLflow experiment; default: the study name")
    checkpoints: Literal["best", "all", "none"] = Field(
        "best",
        description="final checkpoints logged to MLflow: best = of the best configuration per arm "
        "(or per Pareto point), all = every finished trial, none",
    )
    wandb: WandbConfig | None = Field(
        None, description="also log every trial to Weights & Biases (extra: wandb)"
    )
    tensorboard: bool = Field(
        False,
        description="Ray Tune's TensorBoard event files in each trial folder (tensorboard --logdir "
        "<storage>/<study>); off by default: the driver writes them on every reported epoch while the "
        "trial waits",
    )


def _space_schema(schema: dict) -> None:
    """Editors: `include:` is allowed among the parameters (the loader merges the files), and a
    parameter may be null (removes one inherited through extends or include)."""
    schema["additionalProperties"] = {"anyOf": [schema["additionalProperties"], {"type": "null"}]}
    schema["properties"] = {
        "include": {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": "search-space file(s) to merge, relative to this file",
        }
    }


def _kind_schema(schema: dict[str, Any]) -> None:
    """`kind`'s values in the JSON Schema: the registered study kinds, in registration order."""
    schema["enum"] = list(STUDY_KINDS)


class StudySpec(_Section):
    """A whole study: base trial, search space, search algorithm, objectives, where it runs."""

    name: str = Field(
        description="lowercase letters, digits, - and _", json_schema_extra={"pattern": NAME_PATTERN}
    )
    description: str = ""
    extends: str | None = Field(
        None, description="another study file (relative to this one) to inherit; applied by the loader"
    )
    kind: str = Field(
        "train",
        description="comparison: tune every arm with the same budget, then re-run each best",
        json_schema_extra=_kind_schema,
    )
    trial: TrialConfig = Field(default_factory=TrialConfig, description="the base of every trial")
    benchmark: BenchmarkConfig | None = Field(None, description="kind: benchmark only")
    arms: dict[str, list[Any]] | None = Field(
        None,
        description="comparison: trial path -> values; every combination is one arm, tuned on its own",
    )
    reference: dict[str, Any] | None = Field(
        None,
        description="comparison: the arm (or arms) deltas are taken against, e.g. {model.mixer: attention}",
    )
    final: FinalConfig | None = Field(None, description="comparison: the seeds of the final runs")
    tuned_from: str | None = Field(
        None,
        description="comparison: skip tuning; each arm re-runs the point tuned for it by this earlier "
        "comparison study (the source arm whose arms: values it contains), read from MLflow at start",
    )
    match: MatchConfig | None = Field(
        None,
        description="comparison: parameter-matched arms ('better at equal parameters' is another claim "
        "than 'fewer parameters at equal width')",
    )
    space: dict[str, Param] = Field(
        default_factory=dict,
        description="dotted trial path -> distribution",
        json_schema_extra=_space_schema,
    )
    search: SearchConfig = Field(default_factory=SearchConfig)
    objectives: list[Objective] | None = Field(
        None, min_length=1, description="first = the scheduler's metric; default val_top1 max"
    )
    scheduler: SchedulerConfig = Field(default_factory=SchedulerConfig)
    resources: ResourcesConfig = Field(default_factory=ResourcesConfig)
    failure: FailureConfig = Field(default_factory=FailureConfig)
    tracking: TrackingConfig = Field(default_factory=TrackingConfig)
    analysis: AnalysisConfig = Field(
        default_factory=AnalysisConfig, description="what `vitscale analyze` reads besides this study"
    )
    storage: str = Field("./ray_results", description="Ray results: a path, or a URI (s3://...) for clusters")

    @field_validator("kind")
    @classmethod
    def _registered_kind(cls, kind: str) -> str:
        """A registered study kind, read when the file is validated: a plugin's kind counts."""
        if kind not in STUDY_KINDS:
            *rest, last = (repr(name) for name in STUDY_KINDS)
            raise ValueError(
                f"Input should be {', '.join(rest)} or {last}" if rest else f"Input should be {last}"
            )
        return kind

    @field_validator("name")
    @classmethod
    def _check_name(cls, name: str) -> str:
        if not re.fullmatch(NAME_PATTERN, name):
            raise ValueError(
                f"{name!r}: use lowercase letters, digits, '-' and '_', starting with a letter or digit"
            )
        return name

    @model_validator(mode="after")
    def _fill_defaults(self) -> StudySpec:
        if self.objectives is None:
            metric, mode = study_kind(self.kind).default_objective
            self.objectives = [Objective(metric=metric, mode=mode)]
        if self.tracking.experiment is None:
            self.tracking.experiment = self.name
        if self.search.seeds is None:
            self.search.seeds = [self.trial_settings.seed]
        if self.search.num_samples is None and self.search.algorithm != "grid":
            budget = self.search.budget
            if budget is None:
                self.search.num_samples = DEFAULT_NUM_SAMPLES
            else:
                self.search.num_samples = budget.trials or BUDGET_MAX_SAMPLES
        if self.search.fidelity and self.search.confirm is None and not self.tuned_from:
            self.search.confirm = ConfirmConfig()  # low-fidelity tuning is confirmed at full fidelity
        own = SEARCH_SCHEDULERS.get(self.search.algorithm)
        if own is not None and "type" not in self.scheduler.model_fields_set:
            self.scheduler.type = own
        if self.scheduler.max_t is None and self.scheduler.type in ("asha", "hyperband"):
            self.scheduler.max_t = max_epochs(self)
        return self

    @property
    def trial_settings(self) -> Any:
        """The section that sets the seed and device of this kind's trials (`trial.train`, or
        `benchmark`; a benchmark study without one falls back to `trial.train`, checks refuse it)."""
        section: Any = self
        for name in study_kind(self.kind).trial_section.split("."):
            section = getattr(section, name) if section is not None else None
        return section if section is not None else self.trial.train


def max_epochs(spec: StudySpec) -> int | None:
    """The most epochs any trial can run: the base, or the top of a `train.epochs` parameter
    (None: a FLOP budget sets them per trial, `train.train_flops`)."""
    param = spec.space.get("train.epochs")
    if param is None:
        return spec.trial.resolved().train.epochs
    values = [v for v in param.representatives() if isinstance(v, int)] or [
        spec.trial.resolved().train.epochs
    ]
    return max(values)
