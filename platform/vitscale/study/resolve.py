"""From a validated study to trials: points, seeds, resolved configs, and stable keys for them.

Trials are (point, seed) pairs. A *point* maps space keys to values and holds the active
parameters only; the seed goes to `train.seed`. Grid studies run every point of
`grid_points(spec)` once per seed of `spec.search.seeds` (points without seeds: cross them
yourself, e.g. `{"point": tune.grid_search(points), "seed": tune.grid_search(seeds)}`).
Sampler studies draw `search.num_samples` points and run each once per seed.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from vitscale.dotted import set_in
from vitscale.study import space as _space
from vitscale.study.distributions import Param
from vitscale.study.errors import SpecError
from vitscale.study.kinds import STUDY_RULES
from vitscale.study.paths import flatten_section, lookup
from vitscale.study.spec import POPULATION_OPTIONS, StudySpec
from vitscale.study.yamlio import dump
from vitscale.tracking import layout
from vitscale.train.config import TrialConfig, flatten, logged_params
from vitscale.validation import error_lines


def grid_points(spec: StudySpec) -> list[dict[str, Any]]:
    """Every point of a grid study, without seeds: its kind's (`StudyRules.points`): the space's
    points (`space_points`), or a benchmark study's configurations (`benchmark_points`)."""
    return STUDY_RULES[spec.kind].points(spec)


def space_points(spec: StudySpec) -> list[dict[str, Any]]:
    """Every point of a searched space, first space key varying slowest.

    A conditional parameter branches only where its `when:` holds, so {mixer: [attention,
    ssog]} with {num_gaussians: [2, 4], when mixer=ssog} gives 3 points, not 4. A study with an
    empty space has one point, {}.
    """
    return _space.expand(spec.space, spec.trial, Param.values)


def benchmark_points(spec: StudySpec) -> list[dict[str, Any]]:
    """A benchmark study's configurations ({mixer, regime, resolution, attention_backend}, see
    `BenchmarkConfig.configurations`)."""
    return spec.benchmark.configurations() if spec.benchmark else []


def sample_point(spec: StudySpec, sampler: Callable[[str, Param], Any]) -> dict[str, Any]:
    """Define-by-run: call `sampler(key, param)` for each active parameter in dependency order."""
    return _space.sample(spec.space, spec.trial, sampler)


def suggest_point(trial: Any, spec: StudySpec, prefix: str = "") -> dict[str, Any]:
    """Draw a point from an Optuna trial: the body of an Optuna define-by-run space.

    Optuna parameter names are `prefix + key` (e.g. prefix "point/" makes Ray's OptunaSearch
    nest them under config["point"]). Coupled and list values are suggested as JSON labels;
    the returned point holds the decoded values, and `resolve_trial` decodes labels too.
    """
    return _space.sample(spec.space, spec.trial, _space.optuna_sampler(trial, prefix))


def active_params(spec: StudySpec, point: Mapping[str, Any]) -> list[str]:
    """Space keys active given a partial point, in dependency order."""
    return _space.active(spec.space, spec.trial, point)


def decode_point(spec: StudySpec, point: Mapping[str, Any]) -> dict[str, Any]:
    """Labels back to values (Optuna/Ray hand coupled values back as JSON strings)."""
    return {k: spec.space[k].decode(v) if k in spec.space else v for k, v in point.items()}


def describe_point(point: Mapping[str, Any], seed: int | None = None, sample: int | None = None) -> str:
    """A trial's run name (`tracking.layout.run_name`), what differs first: a grid point's values
    ('ssog · ode · w64 · s1'); a sampled point (`sample`: its Optuna trial number) by the names of
    its variants and its number ('ssog · #7 · s0'), its numbers being in the params."""
    values: dict[str, Any] = {}
    for key, value in point.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            value = f"{len(value)}-step schedule"  # a replayed train.schedule: its steps are in the params
        values.update(flatten_section(key, value) if isinstance(value, dict) else {key: value})
    if sample is not None:
        values = {k: v for k, v in values.items() if isinstance(v, str)}
    return layout.run_name(values, seed, sample=sample)


def trial_data(spec: StudySpec, point: Mapping[str, Any], seed: int) -> dict[str, Any]:
    """The unvalidated trial mapping: base trial, then the point's values, then the seed."""
    data = spec.trial.model_dump(mode="python")
    data["model"].pop("image_size", None)  # follows data.resolution
    for key, value in decode_point(spec, point).items():
        node = lookup(key)
        if node is not None and not node.is_leaf:
            for path, item in flatten_section(key, value).items():
                set_in(data, path, copy.deepcopy(item))
        else:
            set_in(data, key, copy.deepcopy(value))
    data["train"]["seed"] = seed
    return data


def resolve_trial(spec: StudySpec, point: Mapping[str, Any], seed: int) -> TrialConfig:
    """The config of one trial: base trial + point (dotted keys, coupled sections) + seed, with
    the recipe values left unset filled from the trial's data set (`TrialConfig.resolved`)."""
    try:
        return TrialConfig.model_validate(trial_data(spec, point, seed)).resolved()
    except ValidationError as exc:
        where = ", ".join(f"{k}={v}" for k, v in point.items()) or "the base trial"
        raise SpecError(error_lines(exc, prefix=f"{spec.name}: trial at {where}")) from None


def run_trial(spec: StudySpec, point: Mapping[str, Any], seed: int) -> TrialConfig:
    """The trial as a worker runs it: `resolve_trial` with its CPU threads decided (train.threads,
    else the trial's CPUs, `resources.cpu`) and its precision (`auto`: bfloat16 on a GPU trial,
    float32 on a CPU one, `trial_device_type`). The trainable runs it and MLflow logs it, so the record
    reruns the trial exactly (`vitscale train --from-run`)."""
    trial = resolve_trial(spec, point, seed)
    trial = trial.with_precision(trial_device_type(trial, spec.resources.gpu))
    threads = trial.train.threads or max(1, int(spec.resources.cpu))
    return trial.model_copy(update={"train": trial.train.model_copy(update={"threads": threads})})


def trial_device_type(trial: TrialConfig, gpus: float) -> str:
    """`cuda` or `cpu`: where a study trial trains, decided on the driver (`train.precision: auto`
    follows it): `train.device` when set, else cuda exactly when the trial asks for GPUs."""
    if trial.train.device != "auto":
        return trial.train.device.split(":")[0]
    return "cuda" if gpus > 0 else "cpu"


def run_params(trial: TrialConfig) -> dict[str, Any]:
    """A trial's MLflow params: `logged_params` (no unset defaults) without the settings of the
    mixers and regimes it does not use (an SSoG run logs no `model.attention.*`; the model reads
    only its own sections)."""
    unused = tuple(f"model.{name}." for name in trial.model.unused_sections())
    return {k: v for k, v in logged_params(trial).items() if not k.startswith(unused)}


def _digest(data: Any, length: int = 16) -> str:
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def config_key(trial: TrialConfig) -> str:
    """Hash of the trial config without its seed: replicates of one configuration share it."""
    return _digest({k: v for k, v in flatten(trial).items() if k != "train.seed"})


def spec_dict(spec: StudySpec) -> dict[str, Any]:
    """The resolved spec as plain data (loadable again as a study file: no extends, no image_size)."""
    data = spec.model_dump(mode="json", by_alias=True)
    data.pop("extends", None)
    data["trial"]["model"].pop("image_size", None)
    for section in STUDY_RULES[spec.kind].unused_sections:
        data.pop(section)  # a benchmark study's trial: unused, and it may not set it
    if data.get("benchmark") is None:
        data.pop("benchmark")
    for key in ("arms", "reference", "final"):  # comparison only: other specs hash as before
        if data.get(key) is None:
            data.pop(key, None)
    if data["search"].get("confirm") is None:  # set for comparisons tuned at a fidelity only
        data["search"].pop("confirm", None)
    for key in POPULATION_OPTIONS:  # pbt / pb2 only: other specs hash as before
        if data["scheduler"].get(key) is None:
            data["scheduler"].pop(key, None)
    return data


def dump_spec(spec: StudySpec) -> str:
    """The resolved spec as YAML: the `spec.yaml` artifact of a study's MLflow parent run."""
    return dump(spec_dict(spec))


def spec_hash(spec: StudySpec) -> str:
    """Hash of the resolved spec (description excluded): tags a study's parent run."""
    data = spec_dict(spec)
    data.pop("description", None)
    return _digest(data)
