"""How many trials a study plans, and the line that says how it expands: grid points (or
num_samples) x seeds; a comparison study: every arm's tuning study, its confirmation runs and its
final runs. Which applies is the study kind's (`StudyRules.count`, `StudyRules.trials_line`)."""

from __future__ import annotations

from typing import NamedTuple

from vitscale.kinds import study_kind
from vitscale.study.comparison import arm_list, arm_study, confirm_top_k
from vitscale.study.kinds import STUDY_RULES
from vitscale.study.resolve import grid_points
from vitscale.study.spec import StudySpec


def count_trials(spec: StudySpec) -> int:
    """Trials the study plans, as its kind counts them."""
    return STUDY_RULES[spec.kind].count(spec)


def trials_line(spec: StudySpec) -> str:
    """'12 trials = 12 grid points x 1 seed': how a study expands (`study validate`, `study show`);
    with a compute budget, the most it can run and when its search (each arm's) stops."""
    line = STUDY_RULES[spec.kind].trials_line(spec)
    compute = spec.search.budget.compute if spec.search.budget is not None else None
    return f"at most {line}, each search until {compute[1]:g} {compute[0]} are spent" if compute else line


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def points_times_seeds(spec: StudySpec) -> int:
    """Grid points (or num_samples) x seeds (benchmark: configurations x seeds)."""
    points = len(grid_points(spec)) if spec.search.algorithm == "grid" else spec.search.num_samples
    return points * len(spec.search.seeds)


def points_line(spec: StudySpec) -> str:
    """'12 trials = 12 grid points x 1 seed' (a benchmark: its configurations), or samples x seeds."""
    if spec.search.algorithm == "grid":
        what = _n(len(grid_points(spec)), study_kind(spec.kind).points_noun)
    else:
        what = _n(spec.search.num_samples, f"{spec.search.algorithm} sample")
    return f"{_n(points_times_seeds(spec), 'trial')} = {what} x {_n(len(spec.search.seeds), 'seed')}"


class Plan(NamedTuple):
    """A comparison's trials by phase."""

    tuning: int  # every arm's tuning study (at search.fidelity where set)
    confirmation: int  # each arm's top points re-run at full fidelity (search.confirm)
    final: int  # each arm's choice x final.seeds


def planned_trials(spec: StudySpec) -> Plan:
    """The trials of a comparison study, by phase. An arm confirms top_k points, or as many as its
    tuning study has (a grid of 2 points, or 2 samples, confirms 2)."""
    arms = arm_list(spec)
    if spec.tuned_from:
        tuning = confirmation = 0
    else:
        studies = [arm_study(spec, arm) for arm in arms]
        tuning = sum(count_trials(study) for study in studies)
        top_k = confirm_top_k(spec)
        confirmation = sum(min(top_k, count_trials(s) // len(s.search.seeds)) for s in studies)
    return Plan(tuning, confirmation, len(arms) * len((spec.final.seeds if spec.final else None) or []))


def comparison_trials(spec: StudySpec) -> int:
    """A comparison's trials: every phase of every arm."""
    return sum(planned_trials(spec))


def comparison_line(spec: StudySpec) -> str:
    """'14 trials = 2 arms x (4 tuning trials + 3 final seeds at full fidelity)'."""
    tuning, confirmation, final = planned_trials(spec)
    arms = len(arm_list(spec))
    fidelity = spec.search.fidelity
    at = f" at {', '.join(f'{k}={v}' for k, v in fidelity.items())}" if fidelity else ""
    if spec.tuned_from:
        return (
            f"{_n(final, 'trial')} = {_n(arms, 'arm')} x {_n(len(spec.final.seeds), 'final seed')}, "
            f"each arm at the point {spec.tuned_from} tuned for it (no tuning here)"
        )
    # every arm has the same budget: the same number of points to confirm
    confirmed = f" + {_n(confirmation // arms, 'confirmation run')}" if confirmation else ""
    return (
        f"{_n(tuning + confirmation + final, 'trial')} = {_n(arms, 'arm')} x "
        f"({_n(tuning // arms, 'tuning trial')}{at}{confirmed}"
        f" + {_n(len(spec.final.seeds), 'final seed')} at full fidelity)"
    )
