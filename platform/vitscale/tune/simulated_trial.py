"""The trial of a simulated study (`tune.cluster_scale`): it holds what a training trial holds and
reports what one reports, without a model.

Its Tune trial holds the placement group Ray Train would place for its workers
(`tune.execution_modes.SIMULATED_WORKERS`), sleeps `epoch_s` per epoch and reports a made-up
learning curve (a fixed score per point and seed, reached at the last epoch) with the test score
at the end, and the number of nodes its worker bundles sit on. Everything around it is the
platform's own: search, scheduler, placement, the driver's callbacks, the MLflow child runs.
"""

from __future__ import annotations

import hashlib
import json
import time
from typing import Any

import ray
from ray import tune
from ray.util.placement_group import placement_group_table

from vitscale.study import run_trial
from vitscale.tracking.layout import (
    RESULT_FAILURE_REASON,
    RESULT_NODE_ID,
    RESULT_NODES_SPANNED,
    RESULT_PLANNED_EPOCHS,
)


def score(point: dict[str, Any], seed: int) -> float:
    """A validation top-1 in [0.5, 0.9), fixed by the point and seed."""
    digest = hashlib.sha256(json.dumps([point, seed], sort_keys=True, default=str).encode()).digest()
    return 0.5 + 0.4 * int.from_bytes(digest[:4], "big") / 2**32


def nodes_spanned() -> int:
    """The distinct nodes of this trial's worker bundles (its placement group's)."""
    group = ray.util.get_current_placement_group()
    if group is None:
        return 1
    return len(set(placement_group_table(group)["bundles_to_node_id"].values()))


def simulated_trial(config: dict[str, Any], spec, epoch_s: float) -> None:
    """`epochs` of `epoch_s` seconds each, one report per epoch, as a training trial reports."""
    trial = run_trial(spec, config["point"], config["seed"])
    epochs = trial.train.epochs
    final = score(config["point"], config["seed"])
    extra = {
        RESULT_NODE_ID: ray.get_runtime_context().get_node_id(),
        RESULT_NODES_SPANNED: nodes_spanned(),
        RESULT_PLANNED_EPOCHS: epochs,
        RESULT_FAILURE_REASON: "",
    }
    for epoch in range(1, epochs + 1):
        time.sleep(epoch_s)
        top1 = final * epoch / epochs
        metrics = {"epoch": epoch, "val_top1": top1, "val_loss": 1.0 - top1, "train_loss": 1.0 - top1}
        if epoch == epochs:
            metrics["test_top1"] = top1
        tune.report({**metrics, **extra})
