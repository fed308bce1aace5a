"""The checks of the `benchmark:` section: a benchmark study needs one and nothing that trains
(no space, no trial, no sampler, no early stopping); every other kind must leave it out."""

from __future__ import annotations

from collections.abc import Iterable

from vitscale.study.errors import Problem
from vitscale.study.spec import StudySpec


def benchmark_problems(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """`kind: benchmark`: its configurations are the `benchmark:` section, all of them measured."""
    if spec.benchmark is None:
        yield Problem("benchmark", "required for kind: benchmark (mixers, regimes, resolutions, ...)")
    if spec.space:
        yield Problem("space", "a benchmark study sweeps benchmark.mixers/regimes/resolutions; remove space")
    if "trial" in spec.model_fields_set:
        yield Problem("trial", "not used by a benchmark study; configure the model in benchmark:")
    if spec.search.algorithm != "grid":
        yield Problem("search.algorithm", "a benchmark study measures every configuration: use grid")
    if spec.scheduler.type != "fifo":
        yield Problem("scheduler.type", f"{spec.scheduler.type} needs epochs; a benchmark study uses fifo")


def no_benchmark(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """Every other kind: its trials are `trial:`, so a `benchmark:` section would be ignored."""
    if spec.benchmark is not None:
        yield Problem("benchmark", f"only for kind: benchmark (this study is kind: {spec.kind})")
