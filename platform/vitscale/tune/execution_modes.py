"""How a training trial runs on Ray, chosen by `resources.workers`: one `ExecutionMode` each.

- one process (`workers: 1`): Tune's trial function trains itself (`tune.trainable.train_trial`),
  holding the trial's `resources`; its worker process is reused trial after trial.
- Ray Train (`workers` > 1): the trial function starts a `TorchTrainer` of that many workers
  (`tune.distributed_trial`), each holding `resources.cpu` / `resources.gpu`. The Tune trial
  itself holds next to nothing (Ray Train V2 acquires the workers' resources), so the number of trials
  in flight is bounded instead: `search.max_concurrent_trials`, else as many worker groups as
  the cluster holds at once. Its actor is not reused: stopping a trial must end its trainer.

- simulated workers (a study kind's own mode, `TuneKind.execution`): the Tune trial itself holds
  the placement group Ray Train would place (`tune.worker_group`) and runs the kind's trial
  function in one process: the scheduler's path at cluster scale without a process per worker
  (`tune.cluster_scale`).

A new mode is one entry here (its trial function, what the Tune trial reserves, reuse, how
many run at once, callbacks on the driver); `tune.tuner` asks `execution_mode(spec)` and names
none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ray import tune

from vitscale.bench.placement import trial_resources
from vitscale.tune import worker_group
from vitscale.tune.distributed_trial import ReleaseWorkerGroups, distributed_train_trial
from vitscale.tune.kinds import TUNE_KINDS


@dataclass(frozen=True)
class ExecutionMode:
    name: str
    function: Callable | None  # Tune's trial function (config, spec=spec); None: the study kind's own
    resources: Callable  # spec -> what each Tune trial reserves ({"cpu": ..., "gpu": ...})
    reuse_actors: bool  # may one Tune actor run trial after trial
    concurrency: Callable  # spec -> TuneConfig.max_concurrent_trials (None: as resources allow)
    driver_callbacks: Callable = list  # () -> Tune callbacks the driver runs for this mode's trials

    def trainable(self, spec, kind_trial: Callable):
        """The trial function (the mode's, else the kind's `kind_trial`) with its spec and
        resources, as `tune.Tuner` takes it."""
        function = self.function or kind_trial
        return tune.with_resources(tune.with_parameters(function, spec=spec), self.resources(spec))


def _as_asked(spec) -> int | None:
    return spec.search.max_concurrent_trials


def worker_groups_at_once(spec) -> int:
    """`search.max_concurrent_trials`, else how many trials' worker groups the connected cluster's
    nodes hold at once (`tune.worker_group.groups_at_once`: whole groups per node where a group
    fits on one; at least 1: an autoscaling cluster may have no node of that kind up yet)."""
    if spec.search.max_concurrent_trials is not None:
        return spec.search.max_concurrent_trials
    return worker_group.groups_at_once(spec.resources, worker_group.alive_nodes())


ONE_PROCESS = ExecutionMode(
    name="one_process",
    function=None,  # the kind's trial: training (tune.trainable.train_trial), a benchmark's timing
    resources=trial_resources,
    reuse_actors=True,
    concurrency=_as_asked,
)
# What the Tune trial of a Ray Train run holds: no CPU or GPU (its workers hold those, and a CPU here
# could leave a node one short for a worker), but Tune refuses an empty request: a MiB of Ray's memory.
DRIVER_RESOURCES = {"cpu": 0, "gpu": 0, "memory": 2**20}

RAY_TRAIN = ExecutionMode(
    name="ray_train",
    function=distributed_train_trial,
    resources=lambda spec: DRIVER_RESOURCES,
    reuse_actors=False,
    concurrency=worker_groups_at_once,
    driver_callbacks=lambda: [ReleaseWorkerGroups()],  # a stopped trial's workers let go of their devices
)
# keyed by whether a trial has more than one worker (resources.workers > 1)
EXECUTION_MODES: dict[bool, ExecutionMode] = {False: ONE_PROCESS, True: RAY_TRAIN}


def worker_group_request(spec) -> tune.PlacementGroupFactory:
    """A Tune trial that holds its workers' bundles itself, placed as Ray Train places them; its
    own process holds nothing (an empty head bundle)."""
    resources = spec.resources
    return tune.PlacementGroupFactory(
        [{}, *worker_group.worker_bundles(resources)], strategy=worker_group.strategy(resources)
    )


SIMULATED_WORKERS = ExecutionMode(
    name="simulated_workers",
    function=None,  # the kind's trial, which starts no workers
    resources=worker_group_request,
    reuse_actors=True,
    concurrency=worker_groups_at_once,  # as many trials in flight as a Ray Train study
)


def execution_mode(spec) -> ExecutionMode:
    """The mode a study's trials run in: its kind's own (`TuneKind.execution`), else one process
    or Ray Train by `resources.workers`."""
    return TUNE_KINDS[spec.kind].execution or EXECUTION_MODES[spec.resources.workers > 1]
