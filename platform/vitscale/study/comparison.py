"""Comparison studies (`kind: comparison`): arms and their own tuning studies (checks: `check_comparison`).

Comparing two arms each at one shared recipe measures the recipe as much as the arms (Melis et
al. 2018). A comparison study tunes every arm (each combination of `arms:` values) with the same
search budget on validation, then re-runs each arm's best configuration over `final.seeds` and
evaluates it on test. This module turns the study into one plain `kind: train` study per arm;
`vitscale.tune.comparison` runs them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from vitscale.study.paths import set_in
from vitscale.study.spec import SchedulerConfig, StudySpec
from vitscale.train.config import TrialConfig

Arm = dict[str, Any]


def arm_list(spec: StudySpec) -> list[Arm]:
    """Every combination of the `arms:` values, first key varying slowest."""
    keys = list(spec.arms or {})
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(spec.arms or {}).values())]


def arm_of(spec: StudySpec, point: Mapping[str, Any]) -> Arm:
    """The arm a point belongs to (its values of the `arms:` keys)."""
    return {k: point.get(k) for k in spec.arms or {}}


def is_reference(spec: StudySpec, arm: Mapping[str, Any]) -> bool:
    return all(arm.get(k) == v for k, v in (spec.reference or {}).items())


def _arm_trial(spec: StudySpec, arm: Mapping[str, Any]):
    """The base trial with the arm's values set (validated: an arm must build a valid trial)."""
    data = spec.trial.model_dump(mode="python")
    data["model"].pop("image_size", None)
    for key, value in arm.items():
        set_in(data, key, value)
    return TrialConfig.model_validate(data)


def _arm_space(spec: StudySpec, arm: Mapping[str, Any]) -> dict:
    """The searched space inside one arm: parameters whose `when:` excludes the arm are dropped."""
    return {
        key: param
        for key, param in spec.space.items()
        if all(arm[p] in values for p, values in param.conditions().items() if p in arm)
    }


def arm_study(spec: StudySpec, arm: Mapping[str, Any]) -> StudySpec:
    """The tuning study of one arm: kind train, the arm fixed in the trial, the same budget."""
    return spec.model_copy(
        update={
            "kind": "train",
            "arms": None,
            "reference": None,
            "final": None,
            "trial": _arm_trial(spec, arm),
            "space": _arm_space(spec, arm),
        }
    )


def final_study(spec: StudySpec) -> StudySpec:
    """The study the final runs resolve against: points are {arm keys..., tuned keys...}."""
    return spec.model_copy(
        update={"kind": "train", "arms": None, "reference": None, "final": None, "scheduler": _fifo()}
    )


def _fifo():
    return SchedulerConfig(type="fifo")
