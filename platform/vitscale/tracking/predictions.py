"""Per-image predictions of a finished trial: the artifact contract its writer (the trial) and its
reader (the analysis) share.

Each finished trial's run holds `predictions/test.parquet` and `predictions/val.parquet`, one row
per image of that split: `index` (the image's position in the split, the same images for every run
of one data config), `label`, `predicted`, `correct`. They let a comparison pair two arms image by
image (McNemar, a bootstrap over test images) instead of only through each run's top-1.
A model also evaluated at another input resolution R (`train.eval_resolutions`, `vitscale
evaluate`) adds `predictions/test@R.parquet` and `predictions/val@R.parquet` beside them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from vitscale.tracking.layout import PREDICTIONS_ARTIFACT

SPLITS = ("val", "test")
SCHEMA = pa.schema(
    [
        ("index", pa.int64()),
        ("label", pa.int64()),
        ("predicted", pa.int64()),
        ("correct", pa.bool_()),
    ]
)


def predictions_name(split: str, resolution: int | None = None) -> str:
    """'test' at the trained resolution, 'test@56' at another: the file's stem."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    return split if resolution is None else f"{split}@{int(resolution)}"


def predictions_path(split: str, resolution: int | None = None) -> str:
    """'predictions/test.parquet' ('predictions/test@56.parquet' at resolution 56): where a run's
    predictions on `split` live among its artifacts."""
    return f"{PREDICTIONS_ARTIFACT}/{predictions_name(split, resolution)}.parquet"


def write_predictions(path: Path | str, index, label, predicted) -> Path:
    """Write one split's predictions (array-likes of equal length); `correct` is derived here, so
    it cannot disagree with label and predicted."""
    index, label, predicted = (np.asarray(a, dtype=np.int64).ravel() for a in (index, label, predicted))
    if not (index.size == label.size == predicted.size):
        raise ValueError(
            f"index, label and predicted differ in length ({index.size}, {label.size}, {predicted.size})"
        )
    table = pa.table(
        {"index": index, "label": label, "predicted": predicted, "correct": label == predicted},
        schema=SCHEMA,
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def read_predictions(path: Path | str) -> pa.Table:
    """One split's predictions with the contract's columns and types (ValueError when they differ)."""
    table = pq.read_table(path)
    missing = [f.name for f in SCHEMA if f.name not in table.column_names]
    if missing:
        raise ValueError(f"{path}: not a predictions file (missing columns {missing})")
    return table.select(SCHEMA.names).cast(SCHEMA)
