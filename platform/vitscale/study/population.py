"""Population-based training in a study (`scheduler: {type: pbt | pb2}`): its rules as data.

The search draws the initial population (a grid, or `num_samples` points of a sampler that does
not learn from results: PBT changes the values the results came from); the scheduler evolves it,
each arm apart. What an exploit may change are the study's own distributions
(`scheduler.hyperparam_mutations`, default: the space's entries a trained model can carry on with,
`train.hyper_schedule.SCHEDULABLE`); `tune.mutations` turns them into Ray Tune's form.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from vitscale.study.distributions import Param
from vitscale.study.errors import Problem
from vitscale.study.resolve import grid_points
from vitscale.study.spec import StudySpec
from vitscale.train.hyper_schedule import SCHEDULABLE


@dataclass(frozen=True)
class PopulationRules:
    """What one population-based scheduler accepts."""

    ranges_only: bool  # its mutations must be ranges (PB2's bandit searches within bounds)
    resamples: bool  # it draws values afresh with resample_probability (PBT)


POPULATION_SCHEDULERS: dict[str, PopulationRules] = {
    "pbt": PopulationRules(ranges_only=False, resamples=True),
    "pb2": PopulationRules(ranges_only=True, resamples=False),
}
# search algorithms that draw a population without learning from results
POPULATION_STARTS = ("grid", "random", "qmc")


def is_population(spec: StudySpec) -> bool:
    return spec.scheduler.type in POPULATION_SCHEDULERS


def population_mutations(spec: StudySpec) -> dict[str, Param]:
    """What an exploit may change: `scheduler.hyperparam_mutations`, else the space's entries
    that a trained model can carry on with (ranges only, where the scheduler needs bounds)."""
    given = spec.scheduler.hyperparam_mutations
    if given is not None:
        return dict(given)
    rules = POPULATION_SCHEDULERS.get(spec.scheduler.type)
    ranges_only = rules is not None and rules.ranges_only
    return {
        k: p
        for k, p in spec.space.items()
        if k in SCHEDULABLE and p.when is None and not (ranges_only and p.bounds() is None)
    }


def population_size(spec: StudySpec) -> int:
    """The members: the grid's points, or `search.num_samples` draws (one seed each)."""
    return len(grid_points(spec)) if spec.search.algorithm == "grid" else spec.search.num_samples


def population_problems(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """A population-based scheduler: a population drawn without feedback, one seed, epochs set
    by the trial (not a FLOP budget), mutations it can apply; its options on no other scheduler."""
    sched = spec.scheduler
    rules = POPULATION_SCHEDULERS.get(sched.type)
    if rules is None:
        given = [
            k
            for k in ("perturbation_interval", "quantile_fraction", "resample_probability")
            if getattr(sched, k) is not None
        ]
        if sched.hyperparam_mutations is not None:
            given.append("hyperparam_mutations")
        for key in given:
            yield Problem(f"scheduler.{key}", f"pbt and pb2 only; remove it (scheduler.type is {sched.type})")
        return
    name = sched.type
    if spec.search.algorithm not in POPULATION_STARTS:
        yield Problem(
            "search.algorithm",
            f"{spec.search.algorithm} learns from finished trials, whose values {name} changes while they "
            f"train; draw the initial population with {', '.join(POPULATION_STARTS)}",
        )
    if spec.trial.train.train_flops is not None or "train.train_flops" in {*(spec.arms or {}), *spec.space}:
        yield Problem(
            "scheduler.type",
            f"{name} exploits at epochs, and train.train_flops gives each trial its own number of them; "
            "use train.epochs",
        )
    if spec.search.budget is not None and spec.search.budget.compute is not None:
        yield Problem(
            "search.budget",
            f"{name} trains a fixed population (search.num_samples); a compute budget draws points until "
            "it is spent: give {trials: N}",
        )
    if len(spec.search.seeds) > 1:
        yield Problem(
            "search.seeds",
            f"{name}: each member's schedule is its own, so seeds cannot replicate it; give one seed "
            "(a comparison re-runs the best member's schedule at final.seeds)",
        )
    cap, members = spec.search.max_concurrent_trials, population_size(spec)
    if cap is not None and cap < members:
        yield Problem(
            "search.max_concurrent_trials",
            f"{name} evolves its {members} members together, but Tune creates a member only when one "
            f"of {cap} ends, so they would never meet to exploit each other; how many train at once "
            "follows resources.cpu and resources.gpu: remove it",
        )
    if sched.resample_probability is not None and not rules.resamples:
        yield Problem("scheduler.resample_probability", f"{name} chooses values itself; remove it")
    mutations = population_mutations(spec)
    if not mutations:
        yield Problem(
            "scheduler.hyperparam_mutations",
            f"{name} needs values to change while members train: give hyperparam_mutations or put one of "
            f"{', '.join(SCHEDULABLE)} in space",
        )
    for key, param in mutations.items():
        where = f"scheduler.hyperparam_mutations.{key}"
        if key not in SCHEDULABLE:
            yield Problem(where, f"cannot change while a trial trains; mutate {', '.join(SCHEDULABLE)}")
        elif param.when is not None:
            yield Problem(where, "when: a mutation applies to every member; remove it")
        elif param.distribution.grid_only:
            yield Problem(where, "grid values are for grid studies; use choice")
        elif rules.ranges_only and param.bounds() is None:
            yield Problem(where, f"{name} searches within bounds: give uniform, loguniform or int")
