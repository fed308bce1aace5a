"""`kind: train` in the study format: its space is searched (a grid or a sampler) against the
trial, every grid point must build a trial, and it may optimise what the trainer reports."""

from __future__ import annotations

from functools import partial

from vitscale.study.check_benchmark import no_benchmark
from vitscale.study.check_comparison import comparison_keys_refused
from vitscale.study.checks import grid_problems, search_problems, trial_space_problems
from vitscale.study.defaults import defaults_over, space_variants
from vitscale.study.kinds import STUDY_RULES, StudyRules
from vitscale.study.plan import points_line, points_times_seeds
from vitscale.study.resolve import space_points
from vitscale.train.metrics import REPORTED_METRICS

# The sections each check reads (skipped where one failed validation).
BENCHMARK_READS = frozenset({"kind", "benchmark", "space", "search", "scheduler"})
SEARCH_READS = frozenset({"kind", "search", "space", "objectives", "scheduler"})
COMPARISON_READS = frozenset(
    {"kind", "arms", "reference", "final", "match", "objectives", "space", "trial", "search"}
)

TRAIN_RULES = STUDY_RULES.register(
    "train",
    StudyRules(
        checks=(
            (BENCHMARK_READS, no_benchmark),
            (SEARCH_READS, search_problems),
            (COMPARISON_READS, comparison_keys_refused),
        ),
        space_checks=trial_space_problems,
        grid_checks=grid_problems,
        metrics=REPORTED_METRICS,
        points=space_points,
        count=points_times_seeds,
        trials_line=points_line,
        run_defaults=partial(defaults_over, variants=space_variants),
    ),
)
