"""predictions.parquet: the per-image correctness of the runs behind a report's arms, read once
from MLflow (each run's `predictions/{test,val}.parquet`, vitscale.tracking.predictions) and kept
beside runs.parquet, so `--from runs.parquet` redraws the same image-level verdicts offline.

Rows: run_id, split ('test', or 'test@56' at another evaluation resolution), index (the image's position in that split), correct. Runs that logged no
predictions (older runs) have no rows; their comparisons fall back to the seed-paired t-interval.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vitscale.analysis.load.beside import SideTable
from vitscale.tracking import store
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT, SPLITS, predictions_path, read_predictions

PREDICTIONS_FILE = "predictions.parquet"
SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("split", pa.string()),
        ("index", pa.int64()),
        ("correct", pa.bool_()),
    ]
)


PREDICTIONS = SideTable(PREDICTIONS_FILE, SCHEMA, "predictions")


def empty() -> pa.Table:
    return PREDICTIONS.empty()


def fetch_predictions(
    tracking_uri: str, run_ids: list[str], on_run: Callable[[], None] | None = None
) -> pa.Table:
    """The predictions of `run_ids` (in that order) from MLflow; a run without them adds no rows."""
    client = store.client_for(tracking_uri)
    parts = []
    with tempfile.TemporaryDirectory() as tmp, store.quiet_artifact_progress():
        for i, run_id in enumerate(run_ids):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            try:
                client.download_artifacts(run_id, PREDICTIONS_ARTIFACT, str(folder))
            except (store.mlflow_exception(), OSError):
                folder = None  # no predictions logged (older runs)
            for path in _prediction_files(folder):
                parts.append(_rows(run_id, path.stem, read_predictions(path)))
            if on_run is not None:
                on_run()
    return pa.concat_tables(parts) if parts else empty()


def _prediction_files(folder: Path | None) -> list[Path]:
    """A run's predictions: val and test at the trained resolution, then at each other one
    (`test@56`, train.eval_resolutions), in a stable order."""
    if folder is None:
        return []
    found = (folder / predictions_path("test")).parent
    files = [found / f"{split}.parquet" for split in SPLITS]
    files = [p for p in files if p.is_file()]
    return files + sorted(p for p in found.glob("*@*.parquet") if p.stem.split("@")[0] in SPLITS)


def _rows(run_id: str, split: str, table: pa.Table) -> pa.Table:
    n = table.num_rows
    return pa.table(
        {
            "run_id": pa.array([run_id] * n, pa.string()),
            "split": pa.array([split] * n, pa.string()),
            "index": table.column("index"),
            "correct": table.column("correct"),
        },
        schema=SCHEMA,
    )


def correctness(table: pa.Table, split: str) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """run_id -> (image index, correct) on `split`, sorted by index."""
    rows = table.filter(pc.equal(table.column("split"), split))
    run_ids = rows.column("run_id").to_numpy(zero_copy_only=False)
    index = rows.column("index").to_numpy()
    correct = rows.column("correct").to_numpy(zero_copy_only=False)
    out = {}
    for run_id in dict.fromkeys(run_ids):
        mask = run_ids == run_id
        order = np.argsort(index[mask], kind="stable")
        out[str(run_id)] = (index[mask][order], correct[mask][order].astype(bool))
    return out
