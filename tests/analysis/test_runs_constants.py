"""Runs that keep params and flops_per_image as MLflow params (new) or metrics (older) analyse alike."""

from __future__ import annotations

import json
import math

from analysis_stores import fake_run

from vitscale.analysis.load.runs import runs_to_table
from vitscale.analysis.statistics.aggregate import group_keys


def test_constants_read_from_params_or_metrics_into_one_metric_column():
    config = {"model.mixer": "ssog", "model.width": 16, "train.seed": 0}
    new = fake_run("r1", "t1", 1, {**config, "params": 3298, "flops_per_image": 111936}, {"val_top1": 0.5})
    old = fake_run("r2", "t2", 2, {**config, "train.seed": 1}, {"val_top1": 0.6, "params": 3298.0})
    bare = fake_run("r3", "t3", 3, {**config, "train.seed": 2}, {"val_top1": 0.7})
    table = runs_to_table([new, old, bare], "s", kind="train")
    assert table.column("params").to_pylist()[:2] == [3298.0, 3298.0]
    assert math.isnan(table.column("params").to_pylist()[2])
    assert table.column("flops_per_image").to_pylist()[0] == 111936.0
    metrics = json.loads(table.schema.metadata[b"vitscale.metric_columns"])
    params = json.loads(table.schema.metadata[b"vitscale.param_columns"])
    assert {"params", "flops_per_image"} <= set(metrics) and params == [
        "model.mixer",
        "model.width",
        "train.seed",
    ]
    # Not a param column, so not a grouping key: the seeds of one configuration stay one group.
    assert len(set(group_keys(table, params))) == 1
