"""The scheduler on a real multi-node Ray cluster (`tune.cluster_scale`): simulated multi-worker
trials are each placed on as few nodes as hold them, and all of them finish and reach MLflow.

The harness runs as users run it, `python -m vitscale.tune.cluster_scale`, in its own process: it
registers `kind: simulated` and starts its own cluster, neither of which may leak into the tests
that share this worker (in-process, 20 of 20 trials died unstarted after other Ray tests)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys

import pytest

from vitscale.tune.cluster_scale import ClusterShape, TrialShape


def test_nodes_needed_counts_whole_nodes():
    shape = ClusterShape(nodes=4, cpus_per_node=8, gpus_per_node=8)
    assert TrialShape(workers=2, cpu=1, gpu=1, epochs=1, epoch_s=0).nodes_needed(shape) == 1
    assert TrialShape(workers=3, cpu=1, gpu=4, epochs=1, epoch_s=0).nodes_needed(shape) == 2
    assert TrialShape(workers=4, cpu=4, gpu=0, epochs=1, epoch_s=0).nodes_needed(shape) == 2


@pytest.mark.slow
def test_twenty_two_worker_trials_on_four_nodes_finish_each_on_one_node(tmp_path):
    args = "--nodes 4 --cpus-per-node 2 --gpus-per-node 8 --trials 20 --seeds 2 --workers 2 --cpu 1 --gpu 1"
    args += f" --epochs 2 --epoch-s 0.2 --sample-s 0.5 --out {tmp_path}"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.pop("RAY_ADDRESS", None)
    done = subprocess.run(
        [sys.executable, "-m", "vitscale.tune.cluster_scale", *args.split()],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    figures = json.loads((tmp_path / "result.json").read_text())
    assert figures["finished"] == 20
    assert figures["trials_at_once"] == 4  # 2 logical CPUs per node: one 2-worker trial per node
    assert (figures["nodes_needed"], figures["max_nodes_spanned"], figures["split_trials"]) == (1, 1, 0)
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        [(children,)] = con.execute(
            "SELECT COUNT(*) FROM runs JOIN tags USING (run_uuid) WHERE key = 'vitscale.role' AND value = 'trial'"
        )
    assert children == 20
    assert figures["mlflow_writes"] > 0 and figures["driver_cpu_s"] > 0
    assert any(sample["running"] for sample in figures["samples"])  # sampled while trials ran
