"""What an arm was given to learn with: epochs, images seen, training images and training FLOPs, as
its finished runs logged them. A verdict is between models at these budgets, so it states them.

Training images: images seen per epoch (the trainer's whole batches: at most one batch short of
the training split it drew from); for runs that logged no images seen, the cap `data.num_train`
where they set one (the split may be smaller than its cap).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float

CAPPED, PER_EPOCH = "data.num_train", "images seen per epoch"


@dataclass(frozen=True)
class Budget:
    runs: int  # the finished runs the means are over
    epochs: float  # train.epochs (NaN when not logged)
    images_seen: float  # the final images_seen (NaN: an older trainer)
    training_images: float
    training_images_from: str  # CAPPED | PER_EPOCH | "" (unknown)
    train_flops: float  # the final train_flops (NaN: not logged)


def _mean(table: pa.Table, column: str, rows: list[int]) -> float:
    if column not in table.column_names or not rows:
        return float("nan")
    values = as_float(table.column(column))[rows]
    values = values[np.isfinite(values)]
    return float(values.mean()) if values.size else float("nan")


def arm_budget(table: pa.Table, rows: list[int]) -> Budget:
    """The budget of an arm's finished runs `rows` (row indices of the runs table), means over them."""
    epochs, seen = _mean(table, "train.epochs", rows), _mean(table, "images_seen", rows)
    capped = _mean(table, CAPPED, rows)
    if np.isfinite(seen) and np.isfinite(epochs) and epochs > 0:
        images, source = seen / epochs, PER_EPOCH
    elif np.isfinite(capped):
        images, source = capped, CAPPED
    else:
        images, source = float("nan"), ""
    return Budget(len(rows), epochs, seen, images, source, _mean(table, "train_flops", rows))
