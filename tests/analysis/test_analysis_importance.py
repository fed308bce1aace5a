"""`vitscale analyze` on a sampler study: fANOVA importance of the searched parameters (table and
figure) and a parallel-coordinates figure, from a small synthetic MLflow store."""

from __future__ import annotations

import csv
import json

import numpy as np
from analysis_stores import _log_run

from vitscale.analysis import analyze
from vitscale.tracking import layout

STUDY = "tiny_tpe"


def _write_tpe_study(uri: str, artifacts) -> None:
    """12 TPE-like trials: val_top1 is driven by train.lr (optimum near 3e-3), barely by width."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(STUDY, artifact_location=artifacts.as_uri())
    tags = {layout.ROLE: "study", layout.STUDY: STUDY, layout.KIND: "train"}
    parent = client.create_run(exp, tags=tags).info.run_id
    space = {"train.lr": {"loguniform": [1.0e-4, 1.0e-1]}, "model.width": {"choice": [16, 32]}}
    client.log_text(parent, json.dumps({"name": STUDY, "space": space}), "spec.yaml")
    rng = np.random.default_rng(0)
    for i in range(12):
        lr, width = float(10 ** rng.uniform(-4, -1)), int(rng.choice([16, 32]))
        val = 0.9 - 0.25 * (np.log10(lr) + 2.5) ** 2 + 0.002 * (width == 32)
        params = {"model.mixer": "ssog", "model.regime": "discrete", "model.width": width, "train.lr": lr}
        params |= {"train.seed": 0, "data.dataset": "digits", "data.resolution": 16}
        run_tags = {layout.STUDY: STUDY, layout.KIND: "train", layout.TRIAL_ID: f"t{i}"}
        run_tags |= {layout.STATUS: "FINISHED", layout.STOPPED_EARLY: "false"}
        metrics = {"val_top1": val, "params": 1000.0 * width, "epoch": 2.0}
        _log_run(client, exp, parent, run_tags, params, [], metrics | {"test_top1": val})


def test_importance_table_and_figures(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_tpe_study(uri, tmp_path / "artifacts")
    analyze(STUDY, uri, out=tmp_path / "out", n_boot=0, log_artifacts=False)
    report = (tmp_path / "out" / "report.md").read_text()
    assert (
        "## Which searched parameters mattered (fANOVA over 12 finished runs, [importance.csv](importance.csv))"
        in report
    )
    assert "| train.lr |" in report
    with (tmp_path / "out" / "importance.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["parameter"] for r in rows][0] == "train.lr"  # the learning rate drives the objective
    assert {r["parameter"] for r in rows} == {"train.lr", "model.width"}
    assert abs(sum(float(r["importance"]) for r in rows) - 1) < 1e-3
    assert all(r["metric"] == "val_top1" and r["runs"] == "12" for r in rows)
    for name in ("hyperparameter_importance", "parallel_coordinates"):
        for ext in ("png", "svg"):
            assert (tmp_path / "out" / "figures" / f"{name}.{ext}").stat().st_size > 1000
