"""Trials that do not fight over cores: threads per trial × trials at once on a node ≤ its CPUs.

Ray starts as many trials on a node as their `resources` fit (and `search.max_concurrent_trials`
allows); each trial then runs its own threads (`train.threads`, or a benchmark's
`benchmark.threads`; by default its CPUs, `resources.cpu`). Threads beyond a trial's share, or a
fractional or zero `resources.cpu` that lets more trials start than the node has cores, put
several busy threads on one core: every OpenMP barrier then waits for a thread that is not
running, and the trials slow each other far more than the arithmetic of sharing says (issue 30:
2 threads per trial on 2 shared cores, 10-14 images/s against 104-124 with one). `check` refuses
such a study before anything starts, in one line naming the keys to change.

"CPUs on the node" is Ray's count for the node (`ray start --num-cpus`, `--num-cpus` for
in-process Ray, by default the cores it detects): it is what Ray places trials by.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping

from vitscale.bench.placement import trial_resources
from vitscale.errors import UserError
from vitscale.study import count_trials
from vitscale.tune.kinds import TUNE_KINDS

THREADS = "train.threads"
BENCH_THREADS = "benchmark.threads"


def threads_per_trial(spec) -> int:
    """The most threads one trial of `spec` runs with, as its kind sets them (`TuneKind.threads`)."""
    return TUNE_KINDS[spec.kind].threads(spec)[1]


def trial_threads(spec) -> tuple[str, int]:
    """A trial that trains: `train.threads` (the base trial, a searched or an arm's value); unset,
    its CPUs (at least 1)."""
    share = max(1, int(spec.resources.cpu))
    chosen = [spec.trial.train.threads or share]
    param = spec.space.get(THREADS)
    if param is not None:
        chosen += list(param.values()) if param.is_finite else [int(param.bounds()[1])]
    chosen += [value for value in (spec.arms or {}).get(THREADS, []) if value]
    return THREADS, max(int(value) for value in chosen)


def benchmark_threads(spec) -> tuple[str, int]:
    """A benchmark's configurations: `benchmark.threads`; unset, its CPUs (at least 1)."""
    share = max(1, int(spec.resources.cpu))
    return BENCH_THREADS, (spec.benchmark.threads if spec.benchmark else None) or share


def trials_at_once(spec, node: Mapping[str, float]) -> float:
    """How many trials of `spec` Ray may run at once on `node` (its resources): what their
    resources fit, at most `search.max_concurrent_trials` and the trials planned (inf: no bound)."""
    asked = trial_resources(spec)
    fits = [math.floor(node.get("CPU", 0) / asked["cpu"]) if asked["cpu"] else math.inf]
    if asked["gpu"]:
        fits.append(math.floor(node.get("GPU", 0) / asked["gpu"]))
    caps = [spec.search.max_concurrent_trials or math.inf, count_trials(spec)]
    return min(*fits, *caps)


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask where the OS has one)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity else os.cpu_count() or 1


def check(spec, nodes: Iterable[Mapping[str, float]], cores: int | None = None) -> None:
    """Refuse `spec` when its trials' threads would share cores on any of `nodes`. `cores`: this
    machine's usable cores, for in-process Ray (given `--num-cpus` above them, Ray would place more
    trials than there are cores)."""
    threads = threads_per_trial(spec)
    for node in nodes:
        at_once = trials_at_once(spec, node)
        ray_cpus = node.get("CPU", 0)
        cpus = min(ray_cpus, cores or math.inf)
        if at_once >= 1 and threads * at_once > cpus:
            raise UserError(_explain(spec, threads, at_once, cpus, ray_cpus))


def _explain(spec, threads: int, at_once: float, cpus: float, ray_cpus: float) -> str:
    """One line: the key that is off, the arithmetic, and the fixes."""
    cpu, share = spec.resources.cpu, max(1, int(spec.resources.cpu))
    many = "any number of" if math.isinf(at_once) else f"{at_once:g}"
    total = "more threads than" if math.isinf(at_once) else f"{threads * at_once:g} threads on"
    cap = f"or cap search.max_concurrent_trials at {max(1, math.floor(cpus / threads))}"
    crowded = f"{total} {cpus:g} CPUs: they would share cores"
    plural = "" if threads == 1 else "s"
    if cpus < ray_cpus:
        return (
            f"--num-cpus: Ray was given {ray_cpus:g} CPUs on this machine's {cpus:g} usable cores, so "
            f"{many} trials at once x {threads} thread{plural} is {crowded}; pass --num-cpus {cpus:g} "
            f"or less (the default: the cores), {cap}"
        )
    if threads > share:
        key = TUNE_KINDS[spec.kind].threads(spec)[0]
        return (
            f"{key}: {threads} threads per trial x {many} trials at once (resources.cpu {cpu:g} on a "
            f"{cpus:g}-CPU node) is {crowded}; set {key} at most resources.cpu (or leave it unset: "
            f"each trial's CPUs), raise resources.cpu to {threads}, {cap}"
        )
    return (
        f"resources.cpu: {cpu:g} CPU per trial lets Ray run {many} trials at once on a {cpus:g}-CPU "
        f"node, each with at least 1 thread ({crowded}); give each trial whole CPUs (resources.cpu: "
        f"1 or more), {cap}"
    )
