"""Where a multi-worker trial's workers go: one bundle per worker, how Ray places the bundles, and
how many trials' groups the cluster holds at once.

Ray Train places a `TorchTrainer`'s workers as one placement group of `resources.workers` bundles
of `resources.cpu` CPUs and `resources.gpu` GPUs each (`tune.distributed_trial`); the simulated
trials of `tune.cluster_scale` hold the same group themselves. Both read it here, so what the
simulation measures is the placement a real study gets.

A trial whose workers fit on one node is placed on one node (`STRICT_PACK`): its all-reduce then
never crosses the network. Ray Train's default (`PACK`, best effort) split such groups where
nodes were left with part of a trial free: on 4 nodes of 8 logical GPUs, 3-worker trials, the
cluster's 32 GPUs held 10 groups by count and its nodes 8 whole ones, so Tune started 10 and Ray
spread 2 over two nodes each (`python -m vitscale.tune.cluster_scale --nodes 4 --trials 40
--workers 3`, docs/performance.md). So the trials in flight are counted per node too
(`groups_at_once`), and a group larger than any node keeps `PACK` (as few nodes as Ray finds).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import ray

ONE_NODE = "STRICT_PACK"  # every bundle on one node, or wait until one node has room
FEWEST_NODES = "PACK"  # Ray Train's default: as few nodes as the bundles fit on, best effort


def worker_bundle(resources) -> dict[str, float]:
    """What one worker of a trial reserves: {"CPU": ..., "GPU": ...} (no GPU key without GPUs)."""
    return {"CPU": resources.cpu, **({"GPU": resources.gpu} if resources.gpu else {})}


def worker_bundles(resources) -> list[dict[str, float]]:
    """The trial's placement group: one bundle per worker."""
    return [worker_bundle(resources)] * resources.workers


def groups_on(node: Mapping[str, float], resources) -> int:
    """How many whole worker groups of `resources` one node (its Ray resources) holds."""
    asked = {key: value * resources.workers for key, value in worker_bundle(resources).items() if value}
    if not asked:
        return 0
    return min(math.floor(node.get(key, 0.0) / value) for key, value in asked.items())


def alive_nodes() -> list[dict[str, float]]:
    """The Ray resources of each alive node of the connected cluster."""
    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def strategy(resources, nodes: Iterable[Mapping[str, float]] | None = None) -> str:
    """One node where one of `nodes` (default: the connected cluster's) holds the whole group;
    else as few nodes as Ray finds (also before an autoscaling cluster has a node up)."""
    nodes = alive_nodes() if nodes is None else nodes
    return ONE_NODE if any(groups_on(node, resources) >= 1 for node in nodes) else FEWEST_NODES


def groups_at_once(resources, nodes: Iterable[Mapping[str, float]]) -> int:
    """Trials the nodes run at once: whole groups per node where a group fits on one node (what
    `ONE_NODE` places), else the cluster's total over a group's; at least 1."""
    nodes = list(nodes)
    whole = sum(groups_on(node, resources) for node in nodes)
    if whole:
        return whole
    total = {key: sum(node.get(key, 0.0) for node in nodes) for key in ("CPU", "GPU")}
    return max(1, groups_on(total, resources))
