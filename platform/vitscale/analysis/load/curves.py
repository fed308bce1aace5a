"""curves.parquet: the per-epoch histories (tracking.layout.CURVE_METRICS, step = epoch) of the runs
behind a report's arms, read once from MLflow and kept beside runs.parquet, so `--from runs.parquet`
redraws the same learning curves and convergence marks offline.

Rows: run_id, epoch, then one column per CURVE_METRICS name (NaN where that epoch logged none:
older runs have no `curve_test_top1`, an epoch skipped by `train.eval_every` no `val_top1`).
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from vitscale.analysis.load.beside import SideTable
from vitscale.tracking import store
from vitscale.tracking.layout import CURVE_METRICS

CURVES_FILE = "curves.parquet"
SCHEMA = pa.schema(
    [("run_id", pa.string()), ("epoch", pa.int64()), *((m, pa.float64()) for m in CURVE_METRICS)]
)


CURVES = SideTable(CURVES_FILE, SCHEMA, "curves")


def fetch_curves(tracking_uri: str, run_ids: list[str], on_run: Callable[[], None] | None = None) -> pa.Table:
    """The histories of `run_ids` (in that order, epochs ascending); a run with none adds no rows."""
    client = store.client_for(tracking_uri)
    rows: dict[str, list] = {name: [] for name in SCHEMA.names}
    for run_id in run_ids:
        by_epoch: dict[int, dict[str, tuple[int, float]]] = {}
        for key in CURVE_METRICS:
            try:
                history = client.get_metric_history(run_id, key)
            except store.mlflow_exception():
                history = []
            for m in history:  # a restarted epoch logged twice: its newest value wins
                seen = by_epoch.setdefault(int(m.step), {}).get(key)
                if seen is None or m.timestamp >= seen[0]:
                    by_epoch[int(m.step)][key] = (m.timestamp, float(m.value))
        for epoch in sorted(by_epoch):
            rows["run_id"].append(run_id)
            rows["epoch"].append(epoch)
            for key in CURVE_METRICS:
                rows[key].append(by_epoch[epoch].get(key, (0, float("nan")))[1])
        if on_run is not None:
            on_run()
    return pa.table(rows, schema=SCHEMA)
