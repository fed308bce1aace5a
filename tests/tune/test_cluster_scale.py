"""The scheduler on a real multi-node Ray cluster (`tune.cluster_scale`): simulated multi-worker
trials are each placed on as few nodes as hold them, and all of them finish and reach MLflow."""

from __future__ import annotations

import sqlite3

import pytest

from vitscale.tune.cluster_scale import ClusterShape, TrialShape, measure


def test_nodes_needed_counts_whole_nodes():
    shape = ClusterShape(nodes=4, cpus_per_node=8, gpus_per_node=8)
    assert TrialShape(workers=2, cpu=1, gpu=1, epochs=1, epoch_s=0).nodes_needed(shape) == 1
    assert TrialShape(workers=3, cpu=1, gpu=4, epochs=1, epoch_s=0).nodes_needed(shape) == 2
    assert TrialShape(workers=4, cpu=4, gpu=0, epochs=1, epoch_s=0).nodes_needed(shape) == 2


@pytest.mark.slow
def test_twenty_two_worker_trials_on_four_nodes_finish_each_on_one_node(tmp_path):
    shape = ClusterShape(nodes=4, cpus_per_node=2, gpus_per_node=8)
    trial = TrialShape(workers=2, cpu=1, gpu=1, epochs=2, epoch_s=0.2)
    figures = measure(shape, trial, trials=20, seeds=2, out=tmp_path, sample_s=0.5)
    assert figures.finished == 20
    assert figures.trials_at_once == 4  # 2 logical CPUs per node: one 2-worker trial per node
    assert (figures.nodes_needed, figures.max_nodes_spanned, figures.split_trials) == (1, 1, 0)
    with sqlite3.connect(tmp_path / "mlflow.db") as con:
        [(children,)] = con.execute(
            "SELECT COUNT(*) FROM runs JOIN tags USING (run_uuid) WHERE key = 'vitscale.role' AND value = 'trial'"
        )
    assert children == 20
    assert figures.mlflow_writes > 0 and figures.driver_cpu_s > 0
    assert any(sample.running for sample in figures.samples)  # the cluster was sampled while trials ran
