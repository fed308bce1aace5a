"""One trial outside Ray (`vitscale train`): its checkpoint folder and its MLflow run, resumable.

    metrics = train_trial(config, checkpoint_dir=Path("ckpt"), resume=False,
                          tracking_uri="sqlite:///mlflow.db", experiment="vitscale-train")

A checkpoint folder belongs to one run: it holds the trial's config (`trial.json`), the MLflow run
id (`mlflow_run_id`), the checkpoint and the tracking queue. `resume=True` continues that run and
refuses a changed config; `resume=False` refuses a folder that already holds a checkpoint. Epochs
the checkpoint holds but MLflow missed (killed between the two writes) are logged on resume, and
every epoch is logged once.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vitscale.device import resolve_device
from vitscale.errors import UserError, make_folder
from vitscale.tracking import layout, provenance, queued, store
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT
from vitscale.train.checkpoint import find_checkpoint, load_checkpoint
from vitscale.train.config import TrialConfig, logged_params  # logged_params: as a study logs them
from vitscale.train.config import flatten as trial_params  # every value of a trial, None included
from vitscale.train.from_mlflow import resolve_source
from vitscale.train.loop import fit, save_predictions, with_threads

RUN_ID_FILE = "mlflow_run_id"
CONFIG_FILE = "trial.json"
TEACHER_DIR = "teacher"  # inside the checkpoint folder: a teacher fetched from MLflow


def train_trial(
    config: TrialConfig,
    *,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    tracking_uri: str | None = None,
    track: bool = True,
    experiment: str = layout.TRAIN_EXPERIMENT,
    show_progress: bool = True,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
    source: str = "vitscale train",
) -> dict[str, Any]:
    """Train `config` (recipe resolved) and return the final epoch's metrics, with `mlflow_run_id`
    when tracked (`track` and a `tracking_uri`). A teacher named by an MLflow run or a models:/ URI
    is downloaded first from `tracking_uri` (tracked or not), into the checkpoint folder if any.

    The MLflow run starts once the data has loaded and the model is built (`fit`'s on_start): a
    bad data root or teacher ends the command with no run left FAILED. A new run is named
    `run_name` (MLflow picks one when None) and tagged `tags` beside its role and the code's git
    provenance (`source`: the command MLflow shows as the run's source); it holds requirements.txt
    and, when the checkout is dirty, git.diff (`tracking.provenance`)."""
    check_checkpoint_dir(checkpoint_dir, resume)
    config = resolve_threads(config, checkpoint_dir, resume)
    device_type = resolve_device(config.train.device, "train.device").type
    config = with_local_teacher(config, tracking_uri, checkpoint_dir).with_precision(device_type)
    if checkpoint_dir is not None:
        check_same_config(config, checkpoint_dir, resume, device_type)

    client = run_id = None
    logged = -1
    if track and tracking_uri is not None:
        store.check_tracking_uri(tracking_uri)
        store.refuse_file_store(tracking_uri)  # the run starts later, in `fit`: say it before training
        # Writes go through a durable queue (kept next to the checkpoint): an outage only delays them.
        client = queued.queued_client(tracking_uri, checkpoint_dir and checkpoint_dir / queued.QUEUE_DIR)

    def start_run() -> None:
        nonlocal run_id, logged
        if resume:
            run_id = mlflow_run(client, experiment, checkpoint_dir, resume)
            logged = _log_missed_epochs(client, run_id, checkpoint_dir)
            return
        captured = provenance.capture(source)
        run_tags = {layout.ROLE: layout.ROLE_TRAIN, **captured.tags(), **(tags or {})}
        run_id = mlflow_run(client, experiment, checkpoint_dir, resume, run_name=run_name, tags=run_tags)
        store.log_params(client, run_id, logged_params(config))
        provenance.log_to_parent(client, run_id, captured)

    def report(metrics: dict[str, float], _checkpoint: Path | None) -> None:
        if client is not None and metrics["epoch"] > logged:  # a resumed run logs each epoch once
            log_epoch(client, run_id, metrics)

    status = "FAILED"
    try:
        result = fit(
            config,
            report=report,
            checkpoint_dir=checkpoint_dir,
            show_progress=show_progress,
            on_start=start_run if client is not None else None,
        )
        status = "FINISHED"
    finally:
        if run_id is not None:
            client.set_terminated(run_id, status)
        if client is not None and status != "FINISHED":
            queued.close_all()
    if client is None:
        return dict(result.metrics)
    if result.checkpoint is not None:
        client.log_artifact(run_id, str(result.checkpoint), artifact_path="checkpoint")
    with tempfile.TemporaryDirectory(prefix="vitscale-predictions-") as folder:
        for path in save_predictions(Path(folder), result.predictions):
            client.log_artifact(run_id, str(path), artifact_path=PREDICTIONS_ARTIFACT)
        queued.close_all()  # sends the files while they exist
    return {**result.metrics, "mlflow_run_id": client.resolve(run_id)}


def resolve_threads(config: TrialConfig, checkpoint_dir: Path | None, resume: bool) -> TrialConfig:
    """`train.threads` as this run uses and logs it: as set; resuming, as the checkpoint's run had
    it (a folder written before threads were recorded keeps torch's choice, as then); else torch's
    count in this process (`loop.with_threads`)."""
    saved = checkpoint_dir / CONFIG_FILE if checkpoint_dir is not None else None
    if config.train.threads is None and resume and saved is not None and saved.is_file():
        threads = json.loads(saved.read_text()).get("train", {}).get("threads")
        return with_threads(config, threads) if threads else config
    return with_threads(config)


def check_checkpoint_dir(checkpoint_dir: Path | None, resume: bool) -> None:
    """`resume` needs a folder holding a checkpoint; a fresh run must not overwrite one."""
    if resume and checkpoint_dir is None:
        raise UserError("--resume: needs --checkpoint-dir, the folder holding the checkpoint")
    if checkpoint_dir is not None:
        make_folder(checkpoint_dir, "--checkpoint-dir")
    if resume and find_checkpoint(checkpoint_dir) is None:
        raise UserError(f"--resume: {checkpoint_dir} holds no checkpoint.pt; train without --resume first")
    if not resume and find_checkpoint(checkpoint_dir) is not None:
        raise UserError(
            f"--checkpoint-dir: {checkpoint_dir} already holds a checkpoint; pass --resume to continue it "
            "or choose another folder"
        )


def with_local_teacher(
    config: TrialConfig, tracking_uri: str | None, checkpoint_dir: Path | None
) -> TrialConfig:
    """`train.distill.teacher` as a local checkpoint file (an MLflow teacher is downloaded here, once)."""
    distill = config.train.distill
    if distill is None or not isinstance(distill.teacher, str):
        return config
    where = (
        Path(checkpoint_dir) / TEACHER_DIR
        if checkpoint_dir
        else Path(tempfile.mkdtemp(prefix="vitscale-teacher-"))
    )
    path, run_id = resolve_source(distill.teacher, tracking_uri, where)
    distill = distill.model_copy(
        update={"teacher": str(path), "teacher_run_id": run_id or distill.teacher_run_id}
    )
    return config.model_copy(update={"train": config.train.model_copy(update={"distill": distill})})


def check_same_config(config: TrialConfig, checkpoint_dir: Path, resume: bool, device_type: str) -> None:
    """A checkpoint continues only the run that wrote it: refuse a changed config on resume.
    A fresh run writes its config into the folder (precision resolved for `device_type`, as run)."""
    path = checkpoint_dir / CONFIG_FILE
    if resume and path.is_file():
        saved = TrialConfig.model_validate(json.loads(path.read_text())).with_precision(device_type)
        saved = trial_params(saved)
        now = trial_params(config)
        changed = [
            f"{k}={saved.get(k)} (now {now.get(k)})" for k in sorted(now) if saved.get(k) != now.get(k)
        ]
        if changed:
            raise UserError(
                f"--resume: the checkpoint in {checkpoint_dir} was trained with {', '.join(changed)}; "
                "resume with the same flags or train into a new --checkpoint-dir"
            )
    else:
        checkpoint_dir.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config.model_dump(mode="json"), indent=2))


def mlflow_run(
    client,
    experiment: str,
    checkpoint_dir: Path | None,
    resume: bool,
    *,
    run_name: str | None = None,
    tags: Mapping[str, str] | None = None,
) -> str:
    """A new run (named `run_name`, tagged `tags`), or (resuming) the run that wrote the
    checkpoint, so epochs continue in it."""
    marker = checkpoint_dir / RUN_ID_FILE if checkpoint_dir else None
    if resume and marker is not None and marker.is_file():
        run_id = marker.read_text().strip()
        client.update_run(run_id, status="RUNNING")
        return run_id
    experiment_id = store.ensure_experiment(client, experiment)
    tags = tags or {layout.ROLE: layout.ROLE_TRAIN}
    # The real id (the create is sent at once; the server was just checked): the marker must outlive the queue.
    run_id = client.resolve(client.create_run(experiment_id, tags=tags, run_name=run_name).info.run_id)
    if marker is not None:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(run_id + "\n")
    return run_id


def log_epoch(client, run_id: str, metrics: dict[str, float]) -> None:
    """One epoch as a study trial logs it: what changes as metrics at step=epoch, the constants
    (parameter count, FLOPs per image) as params, did_not_train as its tag."""
    store.log_metrics(client, run_id, layout.epoch_metrics(metrics), step=int(metrics["epoch"]))
    store.log_params(client, run_id, layout.constant_params(metrics))
    if "did_not_train" in metrics:
        store.set_tags(
            client, run_id, {layout.DID_NOT_TRAIN: "true" if metrics["did_not_train"] else "false"}
        )


def _log_missed_epochs(client, run_id: str, checkpoint_dir: Path) -> int:
    """Log the epochs the checkpoint holds but MLflow missed; the last epoch MLflow now has."""
    logged = max(client.queue.steps.get(run_id, -1), store.last_logged_step(client, run_id))
    for metrics in load_checkpoint(find_checkpoint(checkpoint_dir)).history:
        if metrics["epoch"] > logged:
            log_epoch(client, run_id, metrics)
            logged = int(metrics["epoch"])
    return logged
