"""Runs -> Arrow/Parquet -> replicate aggregates, Pareto fronts, scaling-law fits, figures, report.

Four rooms, one per stage, each module one concept:
- load/: the runs table (runs: MLflow or runs.parquet -> Table; context: parent-run facts;
  fields: normalised columns; outcomes: used / failed / stopped; predictions and curves, the
  tables kept beside runs.parquet (beside); throughput).
- statistics/: what the runs say (aggregate, paired, contest, arms, verdicts, tuning, fronts, fits,
  axes, exponents, crossover, resolution, compute-optimal scaling, importance, varies; learning
  curves, their convergence marks and the arms' budgets).
- figures/: canvas and style shared by every figure; one module per family (scaling, axes,
  resolution, compute_optimal, parallel, curves).
- report/: report.md (markdown building blocks; sections: SECTIONS and render; one module per
  family of sections).
Beside them: steps (STEPS, the analysis steps a study kind lists), result (AnalysisResult) and
pipeline (`analyze`, the orchestrator).
Imports are lazy so `from vitscale.analysis import pareto_front` does not load MLflow.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "analyze": "vitscale.analysis.pipeline",
    "AnalysisResult": "vitscale.analysis.result",
    "pareto_front": "vitscale.analysis.statistics.fronts",
    "pareto_mask": "vitscale.analysis.statistics.fronts",
    "fit_power_law": "vitscale.analysis.statistics.fits",
    "loglog_slope": "vitscale.analysis.statistics.exponents",
    "front_lines": "vitscale.analysis.report.resolution",
    "convergence_note": "vitscale.analysis.statistics.convergence",
}
__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'vitscale.analysis' has no attribute {name!r}")
