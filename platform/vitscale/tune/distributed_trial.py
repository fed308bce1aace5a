"""The trial function of a multi-worker trial (`resources.workers` > 1): a Ray Train `TorchTrainer`
run from inside the Tune trial, as Ray Train V2 (the default in Ray 2.60) does Train under Tune.

The Tune trial holds no resources of its own (`tune.execution_modes`): it starts the trainer,
whose workers each reserve `resources.cpu` / `resources.gpu` and run the same `train.fit` as a
one-process trial with their place in the process group (`train.distributed.Distributed`: DDP,
disjoint shards of every global batch, all-reduced metrics; gloo on CPU, NCCL on CUDA). Everything
else a one-process trial has stays with the Tune trial, so the driver, its MLflow callback, ASHA
and resume see the same trial:

- reports: each epoch, every worker reports its (identical) metrics; a callback on the Train
  controller (`ForwardToTune`) hands rank 0's, with the checkpoint rank 0 wrote, to the Tune
  trial, which reports them to Tune with that checkpoint (copied into the trial's own storage,
  then removed from Train's), so `tune.get_checkpoint()`, retention, `tracking.checkpoints` and the
  per-image predictions beside the final checkpoint work as before;
- stopping: ASHA or median stopping ends the Tune trial; its actor is not reused (a reused
  actor would leave the trainer behind), and the Train controller and workers it owns end with it.
  Their placement group would not (Ray Train's own cleaner needs the dashboard's state API, which
  in-process Ray has not), so the workers report it and the driver removes it once the trial is
  over (`ReleaseWorkerGroups`): the next trial gets the CPUs and GPUs;
- resume: a restored trial passes its checkpoint to every worker, which each load it (model,
  optimiser, schedule, the data generator): the run continues exactly where it stopped;
- failures: the Train run never retries (Tune does, from the checkpoint); a worker's
  `TrialFailure` (diverged, out of memory, ...) is reported with its reason like a one-process
  trial's, anything else fails the Tune trial so Tune retries it.

Ray Train keeps its own records of a run (`ray_train/` in the trial's folder, one run per start,
removed when it ends); nothing there is read back.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

import ray
import ray.train
import ray.train.torch
from ray import tune
from ray._raylet import PlacementGroupID
from ray.train import UserCallback
from ray.train._internal.session import get_session
from ray.train.torch import TorchConfig, TorchTrainer
from ray.util.placement_group import PlacementGroup, placement_group_table, remove_placement_group
from ray.util.queue import Queue

from vitscale import openmp
from vitscale.errors import TrialFailure
from vitscale.study import run_trial
from vitscale.tracking.layout import (
    RESULT_DISCARDED_CHECKPOINT,
    RESULT_FAILURE_REASON,
    RESULT_NODE_ID,
    RESULT_PLANNED_EPOCHS,
    RESULT_WORKER_GROUP,
)
from vitscale.tracking.trial_artifacts import epoch_line, trial_log
from vitscale.train.distributed import Distributed
from vitscale.tune import worker_group
from vitscale.tune.trainable import failure_result, fit_from

TRAIN_FOLDER = "ray_train"  # Ray Train's storage inside the trial's folder (tune.state_digest skips it)
_DONE = "done"  # what the Tune trial's waiting loop gets once the trainer has returned or raised


def distributed_train_trial(config: dict[str, Any], spec) -> None:
    """Tune's function for one trial of `spec.resources.workers` Ray Train workers."""
    logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)
    trial = run_trial(spec, config["point"], config["seed"])  # as MLflow logs it (tune.tuner.describe_trial)
    resources = spec.resources
    extra = {
        RESULT_NODE_ID: ray.get_runtime_context().get_node_id(),
        # a budget's epochs come with each epoch's metrics (train.budget)
        **({RESULT_PLANNED_EPOCHS: trial.train.epochs} if trial.train.train_flops is None else {}),
        RESULT_FAILURE_REASON: "",
    }
    threads = openmp.describe(trial.train.threads)
    trial_log(
        f"trial {config['point']} seed {config['seed']}: {trial.train.length()}, "
        f"{resources.workers} workers ({'NCCL' if resources.gpu else 'gloo'}), each {threads}"
    )
    restored = tune.get_checkpoint()
    storage = get_session().storage  # the trial's folder in the study's storage, which every node reaches
    handoff = Queue(
        maxsize=1, actor_options={"num_cpus": 0}
    )  # Train controller -> this trial, one report at a time
    trainer = _trainer(
        trial, resources, restored, handoff, storage_path=f"{storage.trial_fs_path}/{TRAIN_FOLDER}"
    )
    outcome: dict[str, BaseException] = {}

    def run() -> None:
        try:
            trainer.fit()
        except BaseException as exc:  # noqa: BLE001 - handed to the trial's thread below
            outcome["error"] = exc
        finally:
            handoff.put(_DONE)

    threading.Thread(target=run, name="vitscale-ray-train", daemon=True).start()
    last: dict[str, float] = {}
    try:  # Tune stopping the trial ends this thread inside tune.report (SystemExit)
        while (item := handoff.get()) != _DONE:
            metrics, checkpoint_path = item
            last.clear()
            last.update(metrics)
            discarded = metrics.pop(RESULT_DISCARDED_CHECKPOINT, None)
            if discarded and RESULT_DISCARDED_CHECKPOINT not in extra:
                trial_log(f"WARNING: checkpoint {discarded} is damaged; restarted this trial from epoch 0")
                extra[RESULT_DISCARDED_CHECKPOINT] = discarded
            trial_log(
                epoch_line(metrics, int(metrics[RESULT_PLANNED_EPOCHS]))
            )  # before the report: synced with its checkpoint
            checkpoint = tune.Checkpoint.from_directory(checkpoint_path) if checkpoint_path else None
            tune.report({**metrics, **extra}, checkpoint=checkpoint)  # copies it into the trial's storage
            if checkpoint_path:
                shutil.rmtree(checkpoint_path, ignore_errors=True)  # Train's copy: Tune holds it now
    finally:
        shutil.rmtree(Path(storage.trial_fs_path) / TRAIN_FOLDER, ignore_errors=True)
    error = outcome.get("error")
    if error is None:
        return
    failure = trial_failure(error)
    if failure is None:
        raise error  # a lost worker or a bug: Tune retries the trial from its checkpoint (failure.max_failures)
    trial_log(f"failed: {failure.reason}: {' '.join(str(failure).split())}")
    tune.report(failure_result(spec, last, extra, failure))


def _trainer(trial, resources, restored, handoff, storage_path: str):
    """The TorchTrainer of one start of the trial: `resources.workers` workers of `resources.cpu`
    CPUs and `resources.gpu` GPUs each, never retried by Train itself (Tune does)."""
    return TorchTrainer(
        worker_loop,
        train_loop_config={"trial": trial, "restored": restored.path if restored else None},
        torch_config=TorchConfig(backend="nccl" if resources.gpu else "gloo"),
        scaling_config=ray.train.ScalingConfig(
            num_workers=resources.workers,
            use_gpu=bool(resources.gpu),
            resources_per_worker=worker_group.worker_bundle(resources),
            placement_strategy=worker_group.strategy(resources),
        ),
        run_config=ray.train.RunConfig(
            name=f"run-{uuid.uuid4().hex[:12]}",  # a fresh run each start: Train restores nothing itself
            storage_path=storage_path,
            failure_config=ray.train.FailureConfig(max_failures=0),
            callbacks=[ForwardToTune(handoff)],
            # Train's lines per report and checkpoint would reach the driver's terminal: the trial's
            # own log has each epoch (trial_log above), so only Train's warnings and errors pass.
            logging_config=ray.train.LoggingConfig(log_level="WARNING"),
        ),
    )


def worker_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: `fit` with this worker's rank, world size and device, resumed from the
    Tune trial's checkpoint when it has one (read where Tune stored it: the study's storage, which
    every node reaches). Every worker reports each epoch (Ray Train waits for all of them); rank 0's
    report carries its checkpoint folder."""
    context = ray.train.get_context()
    distributed = Distributed(
        rank=context.get_world_rank(),
        world_size=context.get_world_size(),
        device=ray.train.torch.get_device(),
    )
    workdir = Path(tempfile.mkdtemp(prefix="vitscale-worker-"))
    # Reported every epoch: the workers' placement group (the driver removes it when the trial is
    # over: ReleaseWorkerGroups) and a damaged checkpoint this start discarded (fit_from).
    notes: dict[str, str] = {RESULT_WORKER_GROUP: ray.util.get_current_placement_group().id.hex()}

    def report(metrics: dict[str, float], checkpoint_dir: Path | None) -> None:
        checkpoint = ray.train.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None
        ray.train.report({**metrics, **notes}, checkpoint=checkpoint)

    try:
        restored = config["restored"]
        resume_from = Path(restored) if restored else None
        fit_from(config["trial"], report, workdir / "checkpoint", resume_from, restored, notes, distributed)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


class ForwardToTune(UserCallback):
    """Ray Train callback (on the Train controller): hands each epoch's report of rank 0 and the
    path of the checkpoint Train stored to the Tune trial, waiting while it holds the previous one."""

    def __init__(self, handoff) -> None:
        self.handoff = handoff

    def after_report(self, run_context, metrics: list[dict[str, Any]], checkpoint) -> None:
        self.handoff.put((metrics[0], checkpoint.path if checkpoint else None))


def trial_failure(error: BaseException) -> TrialFailure | None:
    """The TrialFailure a worker raised, found in what `trainer.fit()` raised (Ray Train wraps
    worker errors: WorkerGroupError.worker_failures, RayTaskError causes, exception chains)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        exc = pending.pop(0)
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, TrialFailure):
            return exc
        pending.extend(getattr(exc, "worker_failures", {}).values())
        pending += [getattr(exc, "cause", None), exc.__cause__, exc.__context__]
    return None


class ReleaseWorkerGroups(tune.Callback):
    """Driver side: once a multi-worker trial is over (finished, stopped by the scheduler, failed,
    or restarting after a lost worker), remove its workers' placement group if it is still there.
    Ray Train removes it itself when its run ends normally; a Tune trial that is stopped ends its
    controller before that (the group then outlives it, holding the CPUs and GPUs)."""

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        release(trial.last_result or {})

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        release(trial.last_result or {})

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        release(trial.last_result or {})


def release(result: dict) -> None:
    """Remove the placement group a trial's last result names, unless it is gone already."""
    group_id = result.get(RESULT_WORKER_GROUP)
    if not group_id:
        return
    group = PlacementGroup(PlacementGroupID.from_hex(group_id))
    if placement_group_table(group).get("state") not in (None, "REMOVED"):
        remove_placement_group(group)
