"""`scheduler.type` -> how a study's trials are scheduled on Ray Tune: one registered entry each.

An entry builds the study's scheduler (per arm: `tune.arm_asha`, `tune.arm_population`) and says
what else it needs of the tuner: a population-based one evolves a population drawn up front
(`population`: the search in its place, no searcher: Ray refuses one beside PBT) and keeps more
checkpoints (an exploited member's checkpoint must outlive the clone's restore).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


def no_extra_checkpoints(spec) -> int:
    return 0


@dataclass(frozen=True)
class SchedulerKind:
    build: Callable  # (spec, metric, mode, epochs) -> a Ray Tune TrialScheduler
    population: Callable | None = (
        None  # spec -> (search_alg, param_space, num_samples); None: the kind's search
    )
    extra_checkpoints: Callable = (
        no_extra_checkpoints  # spec -> checkpoints kept per trial beyond the tuner's
    )


SCHEDULERS: dict[str, SchedulerKind] = {}


def register_scheduler(name: str, kind: SchedulerKind) -> SchedulerKind:
    if name in SCHEDULERS:
        raise ValueError(f"scheduler {name!r} is registered twice")
    SCHEDULERS[name] = kind
    return kind


def scheduler_kind(spec) -> SchedulerKind:
    """The entry of the study's `scheduler.type` (the study format's Literal lists the same names)."""
    try:
        return SCHEDULERS[spec.scheduler.type]
    except KeyError:
        raise LookupError(
            f"scheduler.type {spec.scheduler.type!r} has no entry in tune.scheduler_registry.SCHEDULERS; "
            "register one with register_scheduler"
        ) from None
