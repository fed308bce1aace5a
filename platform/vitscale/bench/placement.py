"""How much of a node one trial of a study reserves: a CPU timing takes the whole node.

Two timing trials on one node share its cores, caches and memory bandwidth, and each times the
other: `throughput_resolution_smoke` asked one CPU per trial on 2 cores and measured SSoG at 64 px
at 16.7 ms wall against 2.65 ms of CPU time, then called that a finding. So a benchmark study that
times on the CPU (`benchmark.reserve_node`, default on there) asks Ray for every CPU of the
largest alive node per trial: Ray then runs one timing per node at a time, and a cluster still
times on all its nodes at once. The trial keeps timing with `resources.cpu` threads (what the study
asked, so the numbers match `vitscale bench --threads N`); the other cores stay idle for it.

GPU timings keep what `resources` asks: each trial holds its own GPU. Train and comparison
studies (no `benchmark:` block) always do.
"""

from __future__ import annotations

import os


def times_on_cpu(spec) -> bool:
    """A benchmark trial times on the CPU when told to, or when it reserves no GPU to time on."""
    return spec.benchmark.device == "cpu" or not spec.resources.gpu


def reserves_node(spec) -> bool:
    """`benchmark.reserve_node`, defaulting to whether the study times on the CPU."""
    if spec.benchmark is None:
        return False
    chosen = spec.benchmark.reserve_node
    return times_on_cpu(spec) if chosen is None else chosen


def node_cpus() -> float | None:
    """CPUs of the largest alive Ray node (this machine's count when Ray is not connected)."""
    import ray  # heavy: only when a study places its trials

    if not ray.is_initialized():
        return float(os.cpu_count() or 1)
    found = [n["Resources"].get("CPU", 0.0) for n in ray.nodes() if n.get("Alive")]
    return max(found) if found else None


def trial_resources(spec, cpus_per_node: float | None = None) -> dict[str, float]:
    """{"cpu": ..., "gpu": ...} for one trial of `spec`: `resources` as asked, except that a trial
    that reserves its node asks for all of the largest node's CPUs (never fewer than asked; as
    asked where no node is known yet, e.g. an autoscaling cluster with none up)."""
    asked = {"cpu": spec.resources.cpu, "gpu": spec.resources.gpu}
    if not reserves_node(spec):
        return asked
    cpus = node_cpus() if cpus_per_node is None else cpus_per_node
    return {**asked, "cpu": max(asked["cpu"], cpus)} if cpus else asked
