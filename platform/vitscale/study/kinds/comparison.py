"""`kind: comparison` in the study format: a train study's rules for its trials, plus its arms,
reference and final seeds (`check_comparison`); each arm's own study is checked as a train study,
so its shared space is checked there, per arm. It plans every arm's phases and reports its nulls
per arm."""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from vitscale.study.check_benchmark import no_benchmark
from vitscale.study.check_comparison import comparison_problems
from vitscale.study.checks import search_problems
from vitscale.study.defaults import arm_variants, defaults_over
from vitscale.study.kinds import STUDY_RULES, no_problems
from vitscale.study.kinds.train import BENCHMARK_READS, COMPARISON_READS, SEARCH_READS, TRAIN_RULES
from vitscale.study.plan import comparison_line, comparison_trials

COMPARISON_RULES = STUDY_RULES.register(
    "comparison",
    replace(
        TRAIN_RULES,
        checks=(
            (BENCHMARK_READS, no_benchmark),
            (SEARCH_READS, search_problems),
            (COMPARISON_READS, comparison_problems),
        ),
        space_checks=no_problems,  # checked per arm, in each arm's study
        grid_checks=no_problems,
        count=comparison_trials,
        trials_line=comparison_line,
        run_defaults=partial(defaults_over, variants=arm_variants),
    ),
)
