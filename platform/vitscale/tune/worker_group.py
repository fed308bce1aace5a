"""Where a multi-worker trial's workers go: one bundle per worker, and how Ray places the bundles.

Ray Train places a `TorchTrainer`'s workers as one placement group of `resources.workers` bundles
of `resources.cpu` CPUs and `resources.gpu` GPUs each (`tune.distributed_trial`); the simulated
trials of `tune.cluster_scale` hold the same group themselves. Both read it here, so what the
simulation measures is the placement a real study gets.
"""

from __future__ import annotations

# Ray Train's default (`ScalingConfig.placement_strategy`): as few nodes as the bundles fit on,
# best effort.
STRATEGY = "PACK"


def worker_bundle(resources) -> dict[str, float]:
    """What one worker of a trial reserves: {"CPU": ..., "GPU": ...} (no GPU key without GPUs)."""
    return {"CPU": resources.cpu, **({"GPU": resources.gpu} if resources.gpu else {})}


def worker_bundles(resources) -> list[dict[str, float]]:
    """The trial's placement group: one bundle per worker."""
    return [worker_bundle(resources)] * resources.workers


def strategy(resources) -> str:
    """How Ray places the bundles of one trial's placement group."""
    return STRATEGY
