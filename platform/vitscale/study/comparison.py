"""Comparison studies (`kind: comparison`): arms, their own tuning studies, and their checks.

Comparing two arms each at one shared recipe measures the recipe as much as the arms (Melis et
al. 2018). A comparison study tunes every arm (each combination of `arms:` values) with the same
search budget on validation, then re-runs each arm's best configuration over `final.seeds` and
evaluates it on test. This module turns the study into one plain `kind: train` study per arm;
`vitscale.tune.comparison` runs them.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import ValidationError

from vitscale.study.check_space import check_structure
from vitscale.study.errors import Problem
from vitscale.study.paths import lookup, set_in
from vitscale.study.resolve import count_trials
from vitscale.study.spec import SchedulerConfig, StudySpec
from vitscale.train.config import TrialConfig
from vitscale.validation import error_items

Arm = dict[str, Any]


def arm_list(spec: StudySpec) -> list[Arm]:
    """Every combination of the `arms:` values, first key varying slowest."""
    keys = list(spec.arms or {})
    return [dict(zip(keys, values, strict=True)) for values in itertools.product(*(spec.arms or {}).values())]


def arm_key(arm: Mapping[str, Any]) -> str:
    """'model.mixer=ssog,model.regime=ode': the `vitscale.arm` tag (keys in the order of `arms:`)."""
    return ",".join(f"{k}={v}" for k, v in arm.items())


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


def planned_trials(spec: StudySpec) -> tuple[int, int]:
    """(tuning trials, final runs) of a comparison study."""
    arms = arm_list(spec)
    tuning = sum(count_trials(arm_study(spec, arm)) for arm in arms)
    return tuning, len(arms) * len((spec.final.seeds if spec.final else None) or [])


# -- checks ------------------------------------------------------------------------------------------
def comparison_problems(spec: StudySpec, removed: frozenset[str] = frozenset()) -> Iterable[Problem]:
    """`kind: comparison` needs arms, a reference arm and final seeds; each arm must be searchable."""
    if spec.kind != "comparison":
        for key in ("arms", "reference", "final"):
            if getattr(spec, key) is not None:
                yield Problem(key, "only for kind: comparison")
        return
    if not spec.arms:
        yield Problem(
            "arms", "required for kind: comparison: trial path -> values, e.g. {model.mixer: [a, b]}"
        )
        return
    yield from _arm_keys(spec)
    if spec.final is None:
        yield Problem("final", "required for kind: comparison, e.g. final: {seeds: [0, 1, 2]}")
    yield from _reference(spec)
    if len(spec.objectives) != 1 or not spec.objectives[0].metric.startswith("val_"):
        yield Problem(
            "objectives",
            "a comparison selects each arm's best config on one validation metric, e.g. "
            "[{metric: val_top1, mode: max}]",
        )
    if spec.search.algorithm == "grid" and spec.search.num_samples is not None:
        return  # reported by the search checks
    yield from _arm_checks(spec, removed)


def _arm_keys(spec: StudySpec) -> Iterable[Problem]:
    for key, values in spec.arms.items():
        node = lookup(key)
        if node is None or not node.is_leaf:
            yield Problem(f"arms.{key}", "not a field of the trial (e.g. model.mixer, model.regime)")
        if key in spec.space:
            yield Problem(f"arms.{key}", "also in space: an arm is fixed, not searched; remove one")
        if not values:
            yield Problem(f"arms.{key}", "needs at least one value")
        elif len(set(map(repr, values))) != len(values):
            yield Problem(f"arms.{key}", "a value is listed twice")
    if len(arm_list(spec)) < 2:
        yield Problem("arms", "a comparison needs at least two arms")


def _reference(spec: StudySpec) -> Iterable[Problem]:
    if not spec.reference:
        yield Problem(
            "reference", "required: the arm deltas are taken against, e.g. {model.mixer: attention}"
        )
        return
    for key, value in spec.reference.items():
        if key not in spec.arms:
            yield Problem(f"reference.{key}", f"not a key of arms ({', '.join(spec.arms)})")
        elif value not in spec.arms[key]:
            yield Problem(f"reference.{key}", f"{value!r} is not one of arms.{key} {spec.arms[key]}")


def _arm_checks(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """Run the train-study checks of each arm's study; trial/space problems name the arm."""
    from vitscale.study.checks import check_study  # checks imports this module

    seen = {(p.key, p.message) for p in check_structure(spec.space)}  # reported by the space checks
    for arm in arm_list(spec):
        try:
            study = arm_study(spec, arm)
        except ValidationError as exc:
            problems = [Problem(f"trial.{k}", m) for k, m in error_items(exc)]
        except Exception:  # noqa: BLE001 - a bad arm key is reported by _arm_keys
            continue
        else:
            problems = [
                p for p in check_study(study, removed=removed) if p.key.startswith(("space", "trial"))
            ]
        for p in problems:
            if (p.key, p.message) not in seen:
                seen.add((p.key, p.message))
                yield Problem(p.key, f"{p.message} (in arm {arm_key(arm)})")
