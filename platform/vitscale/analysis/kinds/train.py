"""`kind: train` in the analysis: arms are each mixer x regime's best configuration (from final
runs only where its runs have a final phase), headlined by validation top-1 and parameters."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from vitscale.analysis.kinds import ANALYSIS_KINDS, AnalysisKind
from vitscale.analysis.load.fields import as_float


def has_final_phase(runs: pa.Table) -> bool:
    """A study whose runs have a final phase (re-runs of chosen points) is read from those."""
    return "final" in set(runs.column("phase").to_pylist())


def best_top1(res: Any, idx: list[int], used: np.ndarray) -> dict[str, Any]:
    """The best configuration's validation top-1 and parameters, the mean over every used run."""
    agg = res.aggregates
    ok = [i for i in idx if used[i] > 0]
    row: dict[str, Any] = {"configs": len(idx), "runs": int(as_float(agg.column("n_runs"))[idx].sum())}
    if "val_top1_mean" not in agg.column_names or not ok:
        return row
    top1 = as_float(agg.column("val_top1_mean"))
    best = max(ok, key=lambda i: (np.nan_to_num(top1[i], nan=-1.0), -i))
    run_top1 = as_float(res.runs.column("val_top1")) if "val_top1" in res.runs.column_names else None
    sel = res.runs_of(idx)
    row["best_top1"] = float(top1[best])
    row["mean_top1"] = float(np.nanmean(run_top1[sel])) if run_top1 is not None and sel.size else float("nan")
    if "params_mean" in agg.column_names:
        row["params"] = float(as_float(agg.column("params_mean"))[best])
    return row


TRAIN_ANALYSIS = ANALYSIS_KINDS.register(
    "train",
    AnalysisKind(
        arms_from_final=has_final_phase,
        headline=best_top1,
        summary_columns=(
            ("mixer", "mixer", 1, ""),
            ("regime", "regime", 1, ""),
            ("configs", "configs", 1, ""),
            ("runs", "runs", 1, ""),
            ("best_top1", "best config val top-1 (%)", 100, ".2f"),
            ("mean_top1", "val top-1 over all runs (%)", 100, ".2f"),
            ("params", "params (best config)", 1, ",.0f"),
        ),
    ),
)
