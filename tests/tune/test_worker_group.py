"""Where a multi-worker trial's workers go (`tune.worker_group`): on one node whenever a node holds
them all, and as many trials in flight as the nodes hold whole groups."""

from __future__ import annotations

from types import SimpleNamespace

from vitscale.tune.worker_group import FEWEST_NODES, ONE_NODE, groups_at_once, strategy, worker_bundles


def _resources(workers: int, cpu: float, gpu: float):
    return SimpleNamespace(workers=workers, cpu=cpu, gpu=gpu)


NODES_8_GPUS = [{"CPU": 8.0, "GPU": 8.0}] * 4


def test_one_bundle_per_worker_without_a_gpu_key_on_cpu():
    assert worker_bundles(_resources(2, 1, 0)) == [{"CPU": 1}, {"CPU": 1}]
    assert worker_bundles(_resources(3, 2, 1)) == [{"CPU": 2, "GPU": 1}] * 3


def test_three_worker_trials_on_eight_gpu_nodes_count_whole_groups_per_node():
    # the cluster's totals hold 10 groups of 3 GPUs; its nodes hold 2 whole ones each
    assert groups_at_once(_resources(3, 1, 1), NODES_8_GPUS) == 8
    assert groups_at_once(_resources(4, 1, 1), NODES_8_GPUS) == 8
    assert groups_at_once(_resources(2, 1, 1), [{"CPU": 2.0, "GPU": 8.0}] * 4) == 4  # CPUs bind


def test_a_group_that_fits_a_node_stays_on_one_node_and_a_larger_one_packs():
    assert strategy(_resources(3, 1, 1), NODES_8_GPUS) == ONE_NODE
    assert strategy(_resources(16, 1, 1), NODES_8_GPUS) == FEWEST_NODES
    assert groups_at_once(_resources(16, 1, 1), NODES_8_GPUS) == 2  # across nodes: by the totals
    assert strategy(_resources(2, 1, 1), []) == FEWEST_NODES  # no node up yet (autoscaling)
    assert groups_at_once(_resources(2, 1, 1), []) == 1
