"""The function Ray Tune runs for one training trial, on whatever node Ray places it.

It resolves the trial's config from the spec, trains with `vitscale.train.fit`, and reports every
epoch with its checkpoint. After a worker failure Tune restarts it from that checkpoint; a
checkpoint that cannot be read (truncated, corrupted) is discarded and the trial starts again from
epoch 0, saying so in its log and in its result (`RESULT_DISCARDED_CHECKPOINT`, which the driver
turns into the child run's tag `vitscale.discarded_checkpoint`). A
`TrialFailure` (divergence, solver failure, out of memory) is reported as a final result with a
`failure_reason` instead of raised: retrying would fail the same way, and the study goes on.

Workers are reused between trials (`reuse_actors`, see `tune.tuner`): imports and each data set
stay loaded in the worker, and `tune.worker_cache.begin_trial` resets what a trial could leave.
The trial's log names its threads (`train.threads`, its CPUs unless set) and the OpenMP wait
policy its worker started with (PASSIVE unless the user set one: `vitscale.openmp`).
"""

from __future__ import annotations

import logging
import math
import shutil
import tempfile
from pathlib import Path
from typing import Any

from vitscale import openmp
from vitscale.errors import TrialFailure
from vitscale.study import run_trial
from vitscale.tracking.layout import (
    RESULT_DISCARDED_CHECKPOINT,
    RESULT_FAILURE_MESSAGE,
    RESULT_FAILURE_REASON,
    RESULT_NODE_ID,
    RESULT_PLANNED_EPOCHS,
)
from vitscale.tracking.trial_artifacts import epoch_line, trial_log
from vitscale.train.checkpoint import DamagedCheckpoint
from vitscale.train.distributed import ONE_PROCESS, Distributed
from vitscale.train.loop import fit
from vitscale.tune.result_reporting import report_without_waiting, waits_for_driver
from vitscale.tune.worker_cache import begin_trial


def _closed_log_file_warning(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("ValueError when calling")


def _quiet_closed_trial_logs() -> None:
    """With `log_to_file` and reused workers, Ray closes the previous trial's stdout/stderr files
    while its Tee still holds them, and warns once per write ("ValueError when calling 'flush' on
    stream ...") into the driver's terminal; the line still reaches the other stream, so drop the
    warning."""
    tee_logger = logging.getLogger("ray.tune.utils.util")
    if _closed_log_file_warning not in tee_logger.filters:
        tee_logger.addFilter(_closed_log_file_warning)


def train_trial(config: dict[str, Any], spec) -> None:
    import ray
    from ray import tune

    begin_trial()  # a reused worker: fresh settings, cached data (see tune.worker_cache)
    if not waits_for_driver(spec):  # nothing acts on its epochs: train on while the driver reads them
        report_without_waiting()
    # Ray logs a line per checkpoint (one per epoch): a study of 1,000 trials would drown its status table.
    logging.getLogger("ray.train._internal.storage").setLevel(logging.WARNING)
    _quiet_closed_trial_logs()
    trial = run_trial(spec, config["point"], config["seed"])  # as MLflow logs it (tune.tuner.describe_trial)
    extra = {
        RESULT_NODE_ID: ray.get_runtime_context().get_node_id(),
        # a budget's epochs come with each epoch's metrics (train.budget)
        **({RESULT_PLANNED_EPOCHS: trial.train.epochs} if trial.train.train_flops is None else {}),
        RESULT_FAILURE_REASON: "",
    }
    workdir = Path(tempfile.mkdtemp(prefix="vitscale-trial-"))
    last: dict[str, float] = {}

    threads = openmp.describe(trial.train.threads)  # as fit runs them, and how they wait (vitscale.openmp)
    trial_log(f"trial {config['point']} seed {config['seed']}: {trial.train.length()}, {threads}")

    def report(metrics: dict[str, float], checkpoint_dir: Path | None) -> None:
        last.clear()
        last.update(metrics)
        trial_log(
            epoch_line(metrics, int(metrics[RESULT_PLANNED_EPOCHS]))
        )  # before the report: synced with its checkpoint
        checkpoint = tune.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None
        tune.report({**metrics, **extra}, checkpoint=checkpoint)

    try:
        restored = tune.get_checkpoint()
        resume_from = Path(restored.to_directory(str(workdir / "restored"))) if restored else None
        continued_from = other_trial(restored.path, tune.get_context().get_trial_id()) if restored else None
        fit_from(
            trial,
            report,
            workdir / "checkpoint",
            resume_from,
            restored and restored.path,
            extra,
            continued_from=continued_from,
        )
    except TrialFailure as exc:
        trial_log(f"failed: {exc.reason}: {' '.join(str(exc).split())}")
        tune.report(failure_result(spec, last, extra, exc))
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def other_trial(checkpoint_path: str, trial_id: str) -> str | None:
    """The trial whose checkpoint trial `trial_id` restores, when not its own: a PBT member
    exploiting another continues from that member's checkpoint (trial folders are named by
    trial id, `tune.tuner`)."""
    owner = Path(checkpoint_path).parent.name
    return owner if owner != trial_id else None


def failure_result(spec, last: dict[str, float], extra: dict, exc: TrialFailure) -> dict:
    """The final result of a trial that failed with `exc` after reporting `last`: the objectives
    NaN, the reason and the first line of the message for the driver's callback."""
    objectives = {o.metric: math.nan for o in spec.objectives}
    return {
        **objectives,
        "epoch": last.get("epoch", 0.0),
        **{k: v for k, v in last.items() if k not in objectives},
        **extra,
        RESULT_FAILURE_REASON: exc.reason,
        RESULT_FAILURE_MESSAGE: str(exc).splitlines()[0][:500] if str(exc) else exc.reason,
    }


def fit_from(
    trial,
    report,
    checkpoint_dir: Path,
    resume_from: Path | None,
    source: str | None,
    extra: dict,
    distributed: Distributed = ONE_PROCESS,
    continued_from: str | None = None,
):
    """`fit` resumed from `resume_from` (Tune's copy of the checkpoint at `source`); a damaged one
    is discarded: the trial starts from epoch 0, its log and its results (`extra`) say which.
    MLflow gets no epoch twice: the driver's callback skips the steps the child run already has,
    and a restarted trial's epochs are the same ones again (same seed, same data order). Every
    worker of a multi-worker trial reads the same checkpoint, so they all discard it or none.
    `continued_from`: the other trial whose checkpoint this is (`other_trial`), for `fit`."""
    try:
        return fit(
            trial,
            report=report,
            checkpoint_dir=checkpoint_dir,
            resume_from=resume_from,
            distributed=distributed,
            continued_from=continued_from,
        )
    except DamagedCheckpoint as exc:
        if resume_from is None or exc.path.parent != resume_from:
            raise  # another file (a distillation teacher, say): not this trial's to discard
        where = source or str(resume_from)
        trial_log(f"WARNING: checkpoint {where} is damaged ({exc.why}); restarting this trial from epoch 0")
        extra[RESULT_DISCARDED_CHECKPOINT] = f"{where}: {exc.why}"
        shutil.rmtree(checkpoint_dir, ignore_errors=True)
        return fit(
            trial, report=report, checkpoint_dir=checkpoint_dir, resume_from=None, distributed=distributed
        )
