"""Connecting to Ray and checking, before anything starts, that a trial can be placed at all.

Ray leaves a trial whose resources no node has PENDING forever; the preflight turns that into
one line at once. Autoscaling clusters grow nodes on demand, so `--allow-autoscale` skips it.
"""

from __future__ import annotations

import logging
import os

from vitscale.errors import UserError


def is_remote(address: str | None) -> bool:
    """True when the driver joins an existing cluster instead of starting one in-process."""
    return bool(address)


def connect(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """`ray.init` for this driver: in-process local Ray by default, a cluster with `address`."""
    import ray

    if ray.is_initialized():
        return
    os.environ.setdefault("RAY_DEDUP_LOGS", "1")
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    kwargs = dict(logging_level=logging.WARNING, log_to_driver=True, configure_logging=True)
    try:
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, **kwargs)
    except ConnectionError as exc:
        raise UserError(
            f"--address: cannot connect to the Ray cluster at {address!r} ({exc}); start one "
            "(infra/local/ray-up.sh, `ray up infra/ray/aws-gpu.yaml`) or drop --address to run locally"
        ) from None


def node_capacities() -> list[dict[str, float]]:
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def preflight(cpu: float, gpu: float, allow_autoscale: bool = False) -> None:
    """Fail in one line when no alive node can ever hold one trial's `cpu` and `gpu`."""
    if allow_autoscale:
        return
    nodes = node_capacities()
    if any(n.get("CPU", 0) >= cpu and n.get("GPU", 0) >= gpu for n in nodes):
        return
    have = ", ".join(f"{n.get('CPU', 0):g} CPU/{n.get('GPU', 0):g} GPU" for n in nodes) or "no alive nodes"
    raise UserError(
        f"resources: a trial asks for {cpu:g} CPU and {gpu:g} GPU but no node has that ({have}); "
        "lower `resources` (e.g. --set resources.gpu=0), join a bigger cluster with --address, "
        "or pass --allow-autoscale for an autoscaling cluster"
    )
