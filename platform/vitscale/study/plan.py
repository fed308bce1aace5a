"""How many trials a study plans: grid points (or num_samples) x seeds; a comparison study: every
arm's tuning study, its confirmation runs and its final runs."""

from __future__ import annotations

from typing import NamedTuple

from vitscale.kinds import study_kind
from vitscale.study.comparison import arm_list, arm_study, confirm_top_k
from vitscale.study.resolve import grid_points
from vitscale.study.spec import StudySpec


def count_trials(spec: StudySpec) -> int:
    """Trials the study plans: grid points (or num_samples) x seeds (benchmark: configurations x seeds)."""
    if study_kind(spec.kind).phased:
        return sum(planned_trials(spec))
    points = len(grid_points(spec)) if spec.search.algorithm == "grid" else spec.search.num_samples
    return points * len(spec.search.seeds)


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
