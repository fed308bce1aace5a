"""What became of each run (used, failed, stopped early, killed, did not train) and how a run
that has no valid final number is scored: dropped, or scored as chance.

Dropping runs that did not finish makes an arm that fails more often look better (only its lucky
seeds remain), so every mean and Δ carries these counts, and `chance` scoring is offered: a run
that failed, was stopped early or was killed counts as a classifier at chance (1 / classes).
Did-not-train runs finished at chance level: their measured top-1 stays in, and they are counted.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float
from vitscale.train.metrics import DID_NOT_TRAIN_MARGIN

POLICIES = ("drop", "chance")
SCORED_METRICS = ("val_top1", "test_top1")  # the metrics with a chance level
DATASET_CLASSES = {"digits": 10, "cifar10": 10, "cifar100": 100, "fashion_mnist": 10, "mnist": 10}


def chance_top1(table: pa.Table) -> np.ndarray:
    """Per run 1 / classes where the data set says how many (NaN when unknown: imagefolder)."""
    n = table.num_rows
    names = table.column("data.dataset").to_pylist() if "data.dataset" in table.column_names else [None] * n
    declared = (
        as_float(table.column("data.num_classes")) if "data.num_classes" in table.column_names else None
    )
    classes = np.full(n, np.nan)
    for i, name in enumerate(names):
        if name in DATASET_CLASSES:
            classes[i] = DATASET_CLASSES[name]
        elif name == "synthetic" and declared is not None:
            classes[i] = declared[i]
    return 1.0 / classes


def with_outcomes(table: pa.Table) -> pa.Table:
    """Add `chance_top1` and fill `did_not_train` for untagged finished runs from val_top1 and chance.

    Tagged runs keep their tag; a run whose chance level or val_top1 is unknown stays null (unknown).
    Only runs that finished their schedule (`used`) can be did-not-train.
    """
    chance = chance_top1(table)
    used = np.asarray(table.column("used").to_pylist(), dtype=bool)
    top1 = (
        as_float(table.column("val_top1")) if "val_top1" in table.column_names else np.full(len(used), np.nan)
    )
    tags = (
        table.column("did_not_train").to_pylist()
        if "did_not_train" in table.column_names
        else [None] * len(used)
    )
    dnt = []
    for i, tag in enumerate(tags):
        if not used[i]:
            dnt.append(False)  # counted as failed / stopped early / killed instead
        elif tag is not None:
            dnt.append(bool(tag))
        elif np.isfinite(top1[i]) and np.isfinite(chance[i]):
            dnt.append(bool(top1[i] - chance[i] <= DID_NOT_TRAIN_MARGIN))
        else:
            dnt.append(None)
    out = table
    if "did_not_train" in out.column_names:
        out = out.drop_columns(["did_not_train"])
    out = out.append_column("did_not_train", pa.array(dnt, pa.bool_()))
    return out.append_column("chance_top1", pa.array(chance, pa.float64()))


def outcome_counts(table: pa.Table, rows: list[int] | np.ndarray) -> dict[str, int]:
    """Counts over the given runs: runs, used, failed, stopped early, killed, other, did not train (+ unknown)."""
    rows = [int(i) for i in rows]
    status = table.column("status").to_pylist()
    early = table.column("stopped_early").to_pylist()
    used = table.column("used").to_pylist()
    dnt = table.column("did_not_train").to_pylist()
    return {
        "n_runs": len(rows),
        "n_used": sum(bool(used[i]) for i in rows),
        "n_failed": sum(status[i] == "FAILED" for i in rows),
        "n_stopped_early": sum(bool(early[i]) for i in rows),
        "n_killed": sum(status[i] == "KILLED" for i in rows),
        "n_other": sum(status[i] not in ("FINISHED", "FAILED", "KILLED") for i in rows),
        "n_did_not_train": sum(dnt[i] is True for i in rows),
        "n_did_not_train_unknown": sum(bool(used[i]) and dnt[i] is None for i in rows),
    }


def scored(table: pa.Table, metric: str, policy: str) -> np.ndarray:
    """Per run the value a mean or Δ uses: measured for used runs; for the others NaN (drop) or
    chance (`chance`, top-1 metrics only, where the chance level is known)."""
    if policy not in POLICIES:
        raise ValueError(f"policy must be one of {POLICIES}, not {policy!r}")
    n = table.num_rows
    values = as_float(table.column(metric)) if metric in table.column_names else np.full(n, np.nan)
    used = np.asarray(table.column("used").to_pylist(), dtype=bool)
    out = np.where(used, values, np.nan)
    if policy == "chance" and metric.partition("_at")[0] in SCORED_METRICS:  # test_top1_at56 too
        out = np.where(used, out, as_float(table.column("chance_top1")))
    return out
