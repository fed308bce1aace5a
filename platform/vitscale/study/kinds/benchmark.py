"""`kind: benchmark` in the study format: its configurations are the `benchmark:` section, every
one measured (a grid; no space, no trial, no sampler), and it may optimise what a benchmark
measures."""

from __future__ import annotations

from vitscale.study.check_benchmark import benchmark_problems
from vitscale.study.check_comparison import comparison_keys_refused
from vitscale.study.kinds import STUDY_RULES, StudyRules, no_problems
from vitscale.study.kinds.train import BENCHMARK_READS, COMPARISON_READS
from vitscale.study.plan import points_line, points_times_seeds
from vitscale.study.resolve import benchmark_points
from vitscale.tracking.layout import BENCH_METRICS

BENCHMARK_RULES = STUDY_RULES.register(
    "benchmark",
    StudyRules(
        checks=((BENCHMARK_READS, benchmark_problems), (COMPARISON_READS, comparison_keys_refused)),
        space_checks=no_problems,  # it has no space (refused above)
        grid_checks=no_problems,
        metrics=BENCH_METRICS,
        points=benchmark_points,
        count=points_times_seeds,
        trials_line=points_line,
        run_defaults=no_problems,  # its configurations set everything
        unused_sections=("trial",),
        multi_worker_trials=False,
    ),
)
