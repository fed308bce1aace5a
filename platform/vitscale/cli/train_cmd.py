"""`vitscale train`: one trial from the command line, logged as one MLflow run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.cli.model_cmd import model_options
from vitscale.errors import UserError
from vitscale.train.checkpoint import find_checkpoint, load_checkpoint

_RECIPE = "default: the data set's recommended recipe"
RUN_ID_FILE = "mlflow_run_id"
CONFIG_FILE = "trial.json"


@app.command("train")
@model_options
def train(
    model_overrides: dict,
    dataset: Annotated[
        str, typer.Option(help="digits | synthetic | cifar10 | cifar100 | imagefolder")
    ] = "digits",
    root: Annotated[str | None, typer.Option(help="local path of the data (cifar*, imagefolder)")] = None,
    resolution: Annotated[int, typer.Option("--resolution", "-r", help="image side the model sees")] = 32,
    epochs: Annotated[int | None, typer.Option(help=f"epochs to train [{_RECIPE}]")] = None,
    batch_size: Annotated[int | None, typer.Option(help=f"training batch size [{_RECIPE}]")] = None,
    lr: Annotated[float | None, typer.Option(help=f"peak AdamW learning rate [{_RECIPE}]")] = None,
    warmup_epochs: Annotated[float | None, typer.Option(help=f"linear warmup epochs [{_RECIPE}]")] = None,
    label_smoothing: Annotated[float | None, typer.Option(help=f"label smoothing [{_RECIPE}]")] = None,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay (weight matrices only)")] = 0.05,
    val_fraction: Annotated[float, typer.Option(help="share of train held out for validation")] = 0.1,
    seed: Annotated[int, typer.Option(help="seed of initialisation, shuffling and augmentation")] = 0,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N")] = "auto",
    compile_model: Annotated[bool, typer.Option("--compile", help="torch.compile the model")] = False,
    checkpoint_dir: Annotated[
        Path | None, typer.Option(help="write a checkpoint every epoch into this folder")
    ] = None,
    resume: Annotated[bool, typer.Option(help="continue from the checkpoint in --checkpoint-dir")] = False,
    distill_teacher: Annotated[
        str | None,
        typer.Option(help="distil from this teacher: checkpoint file/folder, MLflow run id or models:/ URI"),
    ] = None,
    distill_weight: Annotated[
        float, typer.Option(help="λ of the trajectory term ‖x(t_k) − h_k‖² / ‖h_k‖² per token")
    ] = 1.0,
    distill_layers: Annotated[
        str, typer.Option(help="teacher blocks k matched at t_k: all | 1,2,...")
    ] = "all",
    distill_schedule: Annotated[str, typer.Option(help="constant | linear_decay (λ to 0)")] = "constant",
    distill_logit_weight: Annotated[float, typer.Option(help="weight of KL to the teacher's logits")] = 0.0,
    tracking_uri: Annotated[str, typer.Option(help="MLflow tracking URI")] = "sqlite:///mlflow.db",
    experiment: Annotated[str, typer.Option(help="MLflow experiment")] = "vitscale-train",
    track: Annotated[bool, typer.Option("--track/--no-track", help="log the run to MLflow")] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the final metrics as one JSON object")
    ] = False,
) -> None:
    """Train one model on one data set (no Ray), with a progress bar and an MLflow run.

    Selection-free: it reports validation metrics every epoch and, at the end, test metrics
    once (`test_top1`); `--json` prints the final epoch's metrics, both included."""
    from vitscale.study import flatten
    from vitscale.tracking import queued, store
    from vitscale.train import TrialConfig, fit

    distill = None
    if distill_teacher is not None:
        distill = _distill(
            distill_teacher, distill_weight, distill_layers, distill_schedule, distill_logit_weight,
            tracking_uri, checkpoint_dir,
        )  # fmt: skip
    config = TrialConfig.model_validate(
        {
            "model": model_overrides,
            "data": {
                "dataset": dataset,
                "root": root,
                "resolution": resolution,
                "val_fraction": val_fraction,
            },
            "train": {
                "epochs": epochs,
                "batch_size": batch_size,
                "lr": lr,
                "warmup_epochs": warmup_epochs,
                "label_smoothing": label_smoothing,
                "weight_decay": weight_decay,
                "seed": seed,
                "device": device,
                "compile": compile_model,
                "distill": distill,
            },
        }
    ).resolved()
    if resume and checkpoint_dir is None:
        raise UserError("--resume: needs --checkpoint-dir, the folder holding the checkpoint")
    if resume and find_checkpoint(checkpoint_dir) is None:
        raise UserError(f"--resume: {checkpoint_dir} holds no checkpoint.pt; train without --resume first")
    if not resume and find_checkpoint(checkpoint_dir) is not None:
        raise UserError(
            f"--checkpoint-dir: {checkpoint_dir} already holds a checkpoint; pass --resume to continue it "
            "or choose another folder"
        )

    if checkpoint_dir is not None:
        _same_config_as_checkpoint(config, checkpoint_dir, resume)

    client = run_id = None
    logged = -1
    if track:
        store.check_tracking_uri(tracking_uri)
        # Writes go through a durable queue (kept next to the checkpoint): an outage only delays them.
        client = queued.queued_client(tracking_uri, checkpoint_dir and checkpoint_dir / queued.QUEUE_DIR)
        run_id = _mlflow_run(client, store, experiment, checkpoint_dir, resume)
        if resume:
            logged = max(client.queue.steps.get(run_id, -1), store.last_logged_step(client, run_id))
            # Epochs the checkpoint holds but MLflow missed (killed between the two writes).
            for metrics in load_checkpoint(find_checkpoint(checkpoint_dir)).history:
                if metrics["epoch"] > logged:
                    store.log_metrics(client, run_id, metrics, step=int(metrics["epoch"]))
                    logged = int(metrics["epoch"])
        else:
            store.log_params(client, run_id, flatten(config))

    def report(metrics: dict[str, float], _checkpoint: Path | None) -> None:
        if client is not None and metrics["epoch"] > logged:  # a resumed run logs each epoch once
            store.log_metrics(client, run_id, metrics, step=int(metrics["epoch"]))

    status = "FAILED"
    try:
        result = fit(config, report=report, checkpoint_dir=checkpoint_dir, show_progress=not as_json)
        status = "FINISHED"
    finally:
        if client is not None:
            client.set_terminated(run_id, status)
            if status != "FINISHED":
                queued.close_all()
    if client is not None:
        if result.checkpoint is not None:
            client.log_artifact(run_id, str(result.checkpoint), artifact_path="checkpoint")
        queued.close_all()
        run_id = client.resolve(run_id)
    final = {**result.metrics, **({"mlflow_run_id": run_id} if run_id else {})}
    if as_json:
        print(json.dumps(final))


def _distill(teacher, weight, layers, schedule, logit_weight, tracking_uri, checkpoint_dir) -> dict:
    """`train.distill` from the flags; an MLflow teacher is downloaded here, once."""
    import tempfile

    from vitscale.train.teacher import resolve_source

    if layers != "all":
        try:
            layers = [int(k) for k in layers.split(",")]
        except ValueError:
            raise UserError(f"--distill-layers: {layers!r} is not `all` or a list like 1,2,4") from None
    where = (
        Path(checkpoint_dir) / "teacher"
        if checkpoint_dir
        else Path(tempfile.mkdtemp(prefix="vitscale-teacher-"))
    )
    path, run_id = resolve_source(teacher, tracking_uri, where)
    return {
        "teacher": str(path),
        "teacher_run_id": run_id,
        "weight": weight,
        "layers": layers,
        "schedule": schedule,
        "logit_weight": logit_weight,
    }


def _same_config_as_checkpoint(config, checkpoint_dir: Path, resume: bool) -> None:
    """A checkpoint continues only the run that wrote it: refuse changed flags on --resume."""
    path = checkpoint_dir / CONFIG_FILE
    current = config.model_dump(mode="json")
    if resume and path.is_file():
        from vitscale.study import flatten

        saved = flatten(type(config).model_validate(json.loads(path.read_text())))
        now = flatten(config)
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
        path.write_text(json.dumps(current, indent=2))


def _mlflow_run(client, store, experiment: str, checkpoint_dir: Path | None, resume: bool) -> str:
    """A new run, or (with --resume) the run that wrote the checkpoint, so epochs continue in it."""
    marker = checkpoint_dir / RUN_ID_FILE if checkpoint_dir else None
    if resume and marker is not None and marker.is_file():
        run_id = marker.read_text().strip()
        client.update_run(run_id, status="RUNNING")
        return run_id
    experiment_id = store.ensure_experiment(client, experiment)
    # The real id (the create is sent at once; the server was just checked): the marker must outlive the queue.
    run_id = client.resolve(client.create_run(experiment_id, tags={"vitscale.role": "train"}).info.run_id)
    if marker is not None:
        marker.parent.mkdir(parents=True, exist_ok=True)
        marker.write_text(run_id + "\n")
    return run_id
