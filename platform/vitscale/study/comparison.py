"""Comparison studies (`kind: comparison`): arms and their own tuning studies (checks: `check_comparison`).

Comparing two arms each at one shared recipe measures the recipe as much as the arms (Melis et
al. 2018). A comparison study tunes every arm (each combination of `arms:` values) with the same
search budget on validation — at `search.fidelity` where set (a cheaper trial: fewer images or
epochs) and with its own sampler seed, so arms do not all draw the same points — then re-runs
each arm's best configuration at full fidelity over `final.seeds` (disjoint from the tuning
seeds) and evaluates it on test. Tuned at a fidelity, each arm's top `search.confirm.top_k` points
are first re-run at full fidelity on the first tuning seed and the arm's configuration is chosen
among those runs (`confirm_study`), so a ranking that does not transfer cannot pick it. This module
turns the study into plain `kind: train` studies per arm and phase; `vitscale.tune.comparison`
runs them.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from vitscale.dotted import set_in
from vitscale.study.matching import matched_values
from vitscale.study.spec import SchedulerConfig, StudySpec, max_epochs
from vitscale.train.config import TrialConfig

Arm = dict[str, Any]
# A phase of a comparison is a plain train study: the comparison's own sections cleared.
AS_TRAIN_STUDY: dict[str, Any] = {
    "kind": "train",
    "arms": None,
    "reference": None,
    "final": None,
    "match": None,
    "tuned_from": None,
}


def arm_list(spec: StudySpec) -> list[Arm]:
    """Every combination of the `arms:` values, first key varying slowest."""
    keys = list(spec.arms or {})
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(spec.arms or {}).values())]


def arm_of(spec: StudySpec, point: Mapping[str, Any]) -> Arm:
    """The arm a point belongs to (its values of the `arms:` keys)."""
    return {k: point.get(k) for k in spec.arms or {}}


def _base_trial(spec: StudySpec, values: Mapping[str, Any]) -> TrialConfig:
    """The base trial with `values` ({dotted trial path: value}) set, validated."""
    data = spec.trial.model_dump(mode="python")
    data["model"].pop("image_size", None)
    for key, value in values.items():
        set_in(data, key, value)
    return TrialConfig.model_validate(data)


def arm_values(spec: StudySpec, arm: Mapping[str, Any]) -> dict[str, Any]:
    """What an arm fixes in both phases: its `arms:` values and, with `match`, its matched value
    (`study.matching`; raises MatchError where none is close enough)."""
    return {**arm, **matched_values(spec, arm, lambda values: _base_trial(spec, values))}


# What a tuning or confirmation trial never computes: selection reads validation only, so test is
# left for the final runs (and the 10,000-image test pass no longer costs every tuning trial).
SELECTION_ONLY: dict[str, Any] = {"train.evaluate_test": False, "train.test_curve": False}


def _arm_trial(spec: StudySpec, arm: Mapping[str, Any], fidelity: Mapping[str, Any] | None = None):
    """The base trial of a tuning or confirmation trial: the arm's values (and the tuning fidelity)
    set, test off; validated: an arm must build a valid trial."""
    return _base_trial(spec, {**arm_values(spec, arm), **(fidelity or {}), **SELECTION_ONLY})


def _arm_search(spec: StudySpec, arm: Mapping[str, Any]):
    """The arm's own search: the same budget, its own sampler seed (the study's + the arm's index),
    so a seeded sampler does not hand every arm the same points; no fidelity (already applied)."""
    search = spec.search
    seed = search.sampler_seed
    if seed is not None:
        seed += [dict(a) for a in arm_list(spec)].index(dict(arm))
    return search.model_copy(update={"sampler_seed": seed, "fidelity": None, "confirm": None})


def _arm_space(spec: StudySpec, arm: Mapping[str, Any]) -> dict:
    """The searched space inside one arm: parameters whose `when:` excludes the arm are dropped."""
    return {
        key: param
        for key, param in spec.space.items()
        if all(arm[p] in values for p, values in param.conditions().items() if p in arm)
    }


def arm_study(spec: StudySpec, arm: Mapping[str, Any]) -> StudySpec:
    """The tuning study of one arm: kind train, the arm (and the tuning fidelity) fixed in the
    trial, the same budget; early stopping's last rung follows the tuning trial's epochs."""
    study = spec.model_copy(
        update={
            **AS_TRAIN_STUDY,
            "trial": _arm_trial(spec, arm, spec.search.fidelity),
            "space": _arm_space(spec, arm),
            "search": _arm_search(spec, arm),
        }
    )
    if spec.search.fidelity and study.scheduler.max_t is not None:
        top = min(study.scheduler.max_t, max_epochs(study))
        study = study.model_copy(update={"scheduler": study.scheduler.model_copy(update={"max_t": top})})
    return study


def confirm_top_k(spec: StudySpec) -> int:
    """How many of each arm's best tuning points are confirmed at full fidelity: `search.confirm.top_k`
    when the arms are tuned here at a fidelity, else 0 (tuning already ran at full fidelity)."""
    confirm = spec.search.confirm
    if confirm is None or not spec.search.fidelity or spec.tuned_from:
        return 0
    return confirm.top_k


def confirm_study(spec: StudySpec, arm: Mapping[str, Any]) -> StudySpec:
    """The confirmation study of one arm: its tuning study at full fidelity (the trial's own values),
    on the first tuning seed only (never a final seed), FIFO: every confirmed point runs all its
    epochs, as a final run would."""
    search = _arm_search(spec, arm).model_copy(update={"seeds": list(spec.search.seeds[:1])})
    return spec.model_copy(
        update={
            **AS_TRAIN_STUDY,
            "trial": _arm_trial(spec, arm),
            "space": _arm_space(spec, arm),
            "search": search,
            "scheduler": _fifo(),
        }
    )


def final_study(spec: StudySpec) -> StudySpec:
    """The study the final runs resolve against: points are {arm keys..., tuned keys...}. Its runs
    also evaluate test after every epoch (`train.test_curve`), for the report's learning curves:
    tuning is over, and nothing reads those numbers but the report."""
    search = spec.search.model_copy(update={"fidelity": None, "confirm": None})
    train = spec.trial.train.model_copy(update={"test_curve": True})
    trial = spec.trial.model_copy(update={"train": train})
    return spec.model_copy(update={**AS_TRAIN_STUDY, "scheduler": _fifo(), "search": search, "trial": trial})


def _fifo():
    return SchedulerConfig(type="fifo")
