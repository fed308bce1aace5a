"""Runs -> Arrow/Parquet -> replicate aggregates, Pareto fronts, scaling-law fits, figures, report.

Modules, one job each: runs (MLflow / runs.parquet -> Table), context (parent-run facts),
fields (normalised mixer/regime/... columns), outcomes (used / failed / stopped / did not train,
drop-or-chance scoring), aggregate (seeds -> mean, std, 95 % CI), paired (seed-paired Δ), arms
(which runs make an arm, its reference), predictions (per-image correctness -> predictions.parquet),
contest (the statistics of a verdict on test: bootstrap over seeds x images, McNemar, TOST, Holm),
verdicts (each arm against its reference), tuning (comparison budgets, edge flags), pareto
(non-dominated rows), fronts (the study's fronts -> CSV), crossover (where SSoG overtakes
attention), fits (power laws), mixing + exponents (cost exponents), resolution + throughput +
resolution_figures + report_resolution (accuracy at each evaluation side, the accuracy–throughput
front over resolutions), compute_points + data_law + isoflop + frontier + frontier_gap +
compute_optimal (+ _figures, report_compute) (L(N, D), isoFLOP minima, the compute-optimal frontier
and the matched-compute gap), axes + axes_levels + axes_trends (+ _figures, report_axes) (error
along Gaussians, ODE tolerance, resolutions), figures, markdown / report / report_arms /
report_bench (report.md), pipeline (`analyze`, the orchestrator).
Imports are lazy so `from vitscale.analysis import pareto_front` does not load MLflow.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "analyze": "vitscale.analysis.pipeline",
    "AnalysisResult": "vitscale.analysis.result",
    "pareto_front": "vitscale.analysis.pareto",
    "pareto_mask": "vitscale.analysis.pareto",
    "fit_power_law": "vitscale.analysis.fits",
    "loglog_slope": "vitscale.analysis.exponents",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vitscale.analysis' has no attribute {name!r}")
