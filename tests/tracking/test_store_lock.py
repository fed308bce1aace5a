"""A new SQLite store used by two processes at once: MLflow creates and migrates its schema on
first use without a lock between processes, which raced ("Online migration expected to match one
row"); `tracking.store.client_for` takes a file lock around that first use."""

from __future__ import annotations

import json
import subprocess
import sys

from mlflow import MlflowClient

TINY = ["--mixer", "attention", "--width", "8", "--depth", "1", "--heads", "1", "--patch-size", "4"]
TINY += ["--resolution", "8", "--epochs", "1", "--batch-size", "32", "--device", "cpu", "--json"]


def test_two_concurrent_trains_on_a_fresh_sqlite_store_both_succeed(tmp_path):
    uri = f"sqlite:///{tmp_path / 'fresh.db'}"
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "vitscale", "train", *TINY, "--seed", str(seed), "--tracking-uri", uri],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in (0, 1)
    ]
    outputs = [p.communicate(timeout=300) for p in procs]
    for proc, (_out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    run_ids = {json.loads(out.strip().splitlines()[-1])["mlflow_run_id"] for out, _ in outputs}
    client = MlflowClient(tracking_uri=uri)
    [experiment] = [e for e in client.search_experiments() if e.name == "vitscale-train"]
    runs = client.search_runs([experiment.experiment_id])
    assert {r.info.run_id for r in runs} == run_ids and len(run_ids) == 2
    for run in runs:
        assert run.info.status == "FINISHED"
        assert [m.step for m in client.get_metric_history(run.info.run_id, "val_top1")] == [1]
