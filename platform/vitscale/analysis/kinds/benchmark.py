"""`kind: benchmark` in the analysis: configurations, not arms, headlined per series by its
largest resolution's images/s and peak memory."""

from __future__ import annotations

from typing import Any

import numpy as np

from vitscale.analysis.kinds import ANALYSIS_KINDS, AnalysisKind
from vitscale.analysis.kinds.train import has_final_phase
from vitscale.analysis.load.fields import as_float

HEADLINE_METRICS = ("images_per_second", "peak_memory_mb")


def largest_resolution(res: Any, idx: list[int], used: np.ndarray) -> dict[str, Any]:
    """The numbers of the series' largest measured resolution."""
    agg = res.aggregates
    ok = [i for i in idx if used[i] > 0]
    row: dict[str, Any] = {"configs": len(idx), "runs": int(as_float(agg.column("n_runs"))[idx].sum())}
    resolution = as_float(agg.column("resolution"))
    if ok:
        top = max(ok, key=lambda i: resolution[i])
        row["resolution"] = int(resolution[top])
        for metric in HEADLINE_METRICS:
            if f"{metric}_mean" in agg.column_names:
                row[metric] = float(as_float(agg.column(f"{metric}_mean"))[top])
    return row


BENCHMARK_ANALYSIS = ANALYSIS_KINDS.register(
    "benchmark",
    AnalysisKind(
        arms_from_final=has_final_phase,  # no phases: never
        headline=largest_resolution,
        summary_columns=(
            ("series", "series", 1, ""),
            ("regime", "regime", 1, ""),
            ("configs", "configs", 1, ""),
            ("runs", "runs", 1, ""),
            ("resolution", "resolution", 1, ""),
            ("images_per_second", "images/s", 1, ".1f"),
            ("peak_memory_mb", "peak MB", 1, ".0f"),
        ),
    ),
)
