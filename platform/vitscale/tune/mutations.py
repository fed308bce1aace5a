"""A study's mutations (`scheduler.hyperparam_mutations`, its own distributions) in Ray Tune's form:
the one place that converts them.

A trial's values sit in `config["point"]` under their dotted keys, so every form nests there.
- PBT (`pbt_mutations`): a listed distribution (choice) is a list (an exploit moves to a
  neighbouring value, or resamples); a range is a Tune domain (an exploit multiplies by 0.8 or
  1.2, or resamples from the domain).
- PB2 (`pb2_bounds`): [low, high] of each range; its bandit picks within them.
Ray keeps neither inside the study's range (x1.2 of the top, PB2's float32 picks, an int turned
float): `KeepInSpace` puts every mutated value back on its distribution, as Ray's custom explore
function.
"""

from __future__ import annotations

from typing import Any

from ray import tune

from vitscale.study.distributions import Param


def _domain(param: Param):
    """A range as the Tune domain that resamples it."""
    low, high = param.bounds()
    facts = param.distribution.facts
    if facts.integer:
        step = int(param.step or 1)
        if param.log:
            return tune.lograndint(low, high + 1)
        return tune.qrandint(low, high, step) if step > 1 else tune.randint(low, high + 1)
    if facts.log_scale:
        return tune.loguniform(low, high)
    return tune.quniform(low, high, param.step) if param.step else tune.uniform(low, high)


def pbt_mutations(params: dict[str, Param]) -> dict[str, Any]:
    """{"point": {key: list or domain}} for `PopulationBasedTraining(hyperparam_mutations=...)`."""
    return {
        "point": {
            key: list(param.values()) if param.distribution.listed else _domain(param)
            for key, param in params.items()
        }
    }


def pb2_bounds(params: dict[str, Param]) -> dict[str, Any]:
    """{"point": {key: [low, high]}} for `PB2(hyperparam_bounds=...)` (ranges only: spec checks)."""
    return {"point": {key: list(param.bounds()) for key, param in params.items()}}


class KeepInSpace:
    """Ray's `custom_explore_fn`: each mutated value clipped into its range, on its step, whole
    where the range is; picklable (the scheduler is saved with the experiment)."""

    def __init__(self, params: dict[str, Param]) -> None:
        self.params = {k: p.model_dump(mode="json", by_alias=True) for k, p in params.items()}

    def __call__(self, config: dict[str, Any]) -> dict[str, Any]:
        point = dict(config.get("point") or {})
        for key, raw in self.params.items():
            param = Param.model_validate(raw)
            if key in point and param.bounds() is not None:
                point[key] = _onto(param, point[key])
        return {**config, "point": point}


def _onto(param: Param, value: Any) -> Any:
    low, high = param.bounds()
    value = min(max(float(value), low), high)
    if param.step:
        value = low + round((value - low) / param.step) * param.step
    return int(round(value)) if param.distribution.facts.integer else value
