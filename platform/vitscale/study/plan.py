"""How many trials a study plans: grid points (or num_samples) x seeds; a comparison study: every
arm's tuning study plus its final runs."""

from __future__ import annotations

from vitscale.kinds import study_kind
from vitscale.study.comparison import arm_list, arm_study
from vitscale.study.resolve import grid_points
from vitscale.study.spec import StudySpec


def count_trials(spec: StudySpec) -> int:
    """Trials the study plans: grid points (or num_samples) x seeds (benchmark: configurations x seeds)."""
    if study_kind(spec.kind).phased:
        return sum(planned_trials(spec))
    points = len(grid_points(spec)) if spec.search.algorithm == "grid" else spec.search.num_samples
    return points * len(spec.search.seeds)


def planned_trials(spec: StudySpec) -> tuple[int, int]:
    """(tuning trials, final runs) of a comparison study."""
    arms = arm_list(spec)
    tuning = 0 if spec.tuned_from else sum(count_trials(arm_study(spec, arm)) for arm in arms)
    return tuning, len(arms) * len((spec.final.seeds if spec.final else None) or [])
