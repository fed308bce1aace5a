"""`vitscale train`: one trial from the command line, logged as one MLflow run.

The flags (and `--set`) build a TrialConfig; `vitscale.train.resume.train_trial` does the rest
(checkpoint folder, MLflow run, resume)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vitscale import train as vtrain  # vtrain.logged_trial imports torch and MLflow when first read
from vitscale.cli.app import app
from vitscale.cli.model_cmd import model_options
from vitscale.cli.overrides import set_option, validate_with_sets
from vitscale.data.registry import DATASETS, native_size
from vitscale.errors import UserError
from vitscale.tracking import layout
from vitscale.tracking.layout import DEFAULT_TRACKING_URI
from vitscale.train import TrialConfig

_RECIPE = "default: the data set's recommended recipe"
DEFAULT_RESOLUTION = (
    32  # where the data set stores no fixed size (imagefolder, synthetic, digits' 8 upsampled)
)
DATASET_NAMES = sorted(DATASETS)
_SET_EXAMPLE = "model.ssog.num_gaussians=8"
TrainSetOption = set_option(
    "the trial (model.*, data.*, train.*)",
    f"--set {_SET_EXAMPLE} --set train.lr=1e-3 --set data.num_train=512",
)


@app.command("train")
@model_options
def train(
    ctx: typer.Context,
    model_overrides: dict,
    dataset: Annotated[str, typer.Option(help=" | ".join(DATASET_NAMES))] = "digits",
    root: Annotated[
        str | None,
        typer.Option(help="local path of the data (cifar*, imagefolder, shards, fashion_mnist, mnist)"),
    ] = None,
    resolution: Annotated[
        int | None,
        typer.Option(
            "--resolution",
            "-r",
            help="image side the model sees [default: the data set's own (28, 32), else 32]",
        ),
    ] = None,
    num_train: Annotated[
        int | None, typer.Option(help="train on at most this many images (a seeded, stratified subset)")
    ] = None,
    num_val: Annotated[int | None, typer.Option(help="validate on at most this many images")] = None,
    epochs: Annotated[int | None, typer.Option(help=f"epochs to train [{_RECIPE}]")] = None,
    batch_size: Annotated[int | None, typer.Option(help=f"training batch size [{_RECIPE}]")] = None,
    lr: Annotated[float | None, typer.Option(help=f"peak AdamW learning rate [{_RECIPE}]")] = None,
    warmup_epochs: Annotated[float | None, typer.Option(help=f"linear warmup epochs [{_RECIPE}]")] = None,
    label_smoothing: Annotated[float | None, typer.Option(help=f"label smoothing [{_RECIPE}]")] = None,
    weight_decay: Annotated[float, typer.Option(help="AdamW weight decay (weight matrices only)")] = 0.05,
    val_fraction: Annotated[float, typer.Option(help="share of train held out for validation")] = 0.1,
    seed: Annotated[int, typer.Option(help="seed of initialisation, shuffling and augmentation")] = 0,
    device: Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N")] = "auto",
    precision: Annotated[
        str,
        typer.Option(
            help="auto | float32 | bfloat16: bfloat16 autocasts the forward (training and evaluation) on "
            "CPU or CUDA; auto = bfloat16 on CUDA and on CPUs with native bf16 (AVX512-BF16, AMX), else float32"
        ),
    ] = "auto",
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
    from_run: Annotated[
        str | None,
        typer.Option(
            "--from-run",
            metavar="RUN_ID",
            help="rerun the trial an MLflow run logged (a study trial reproduces its metrics on the same "
            "device); --set changes it, the other trial flags are refused",
        ),
    ] = None,
    set_: TrainSetOption = None,
    tracking_uri: Annotated[str, typer.Option(help="MLflow tracking URI")] = DEFAULT_TRACKING_URI,
    experiment: Annotated[
        str | None,
        typer.Option(help="MLflow experiment [default: vitscale-train; with --from-run, the source run's]"),
    ] = None,
    track: Annotated[bool, typer.Option("--track/--no-track", help="log the run to MLflow")] = True,
    as_json: Annotated[
        bool, typer.Option("--json", help="print the final metrics as one JSON object")
    ] = False,
) -> None:
    """Train one model on one data set (no Ray), with a progress bar and an MLflow run.

    Selection-free: it reports validation metrics every epoch and, at the end, test metrics
    once (`test_top1`); `--json` prints the final epoch's metrics, both included. `--set PATH=VALUE`
    reaches every key of the trial (`vitscale study schema` lists them) and wins over the flags.
    `--from-run RUN_ID` takes the whole trial from a logged run (read from --tracking-uri)."""
    # Lazy: the trainer's driver imports MLflow, which `vitscale --help` need not pay for.
    from vitscale.train.resume import train_trial

    source = None
    if from_run is not None:
        _refuse_trial_flags(ctx)
        source = vtrain.logged_trial(from_run, tracking_uri)
        raw = source.trial
        if raw["train"].get("threads") is None and not any(
            s.startswith("train.threads=") for s in set_ or ()
        ):
            typer.echo(
                f"note: run {from_run} logged no train.threads (an older record): torch picks the thread "
                "count, so metrics may differ; pass --set train.threads=N as the run had",
                err=True,
            )
    else:
        distill = None
        if distill_teacher is not None:
            distill = {
                "teacher": distill_teacher,
                "weight": distill_weight,
                "layers": _layers(distill_layers),
                "schedule": distill_schedule,
                "logit_weight": distill_logit_weight,
            }
        raw = {
            "model": model_overrides,
            "data": {
                "dataset": dataset,
                "root": root,
                "resolution": resolution or native_size(dataset, DEFAULT_RESOLUTION),
                "val_fraction": val_fraction,
                "num_train": num_train,
                "num_val": num_val,
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
                "precision": precision,
                "compile": compile_model,
                "distill": distill,
            },
        }
    config = validate_with_sets(TrialConfig, raw, set_ or (), _SET_EXAMPLE).resolved()
    experiment = experiment or (source.experiment if source else layout.TRAIN_EXPERIMENT)
    final = train_trial(
        config,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        tracking_uri=tracking_uri,
        track=track,
        experiment=experiment,
        show_progress=not as_json,
        # a rerun: named after its source, tagged with its id, beside it in its experiment
        run_name=layout.rerun_name(source.run_name) if source else None,
        tags={layout.FROM_RUN: source.run_id} if source else None,
        source=f"vitscale train --from-run {from_run}" if source else "vitscale train",
    )
    if as_json:
        print(json.dumps(final))
    else:
        print(result_line(final, experiment, source))


def result_line(final: dict, experiment: str, source) -> str:
    """The end of `vitscale train`: the test top-1 (a rerun's beside its source's) and the run."""
    test = final.get("test_top1")
    line = "test top-1 " + (f"{100 * test:.2f} %" if test is not None else "not measured")
    if source is not None:
        was = f"{100 * source.test_top1:.2f} %" if source.test_top1 is not None else "none logged"
        line += f" (source run {source.run_id}: {was})"
    if "mlflow_run_id" in final:
        line += f"; MLflow run {final['mlflow_run_id']} in experiment {experiment}"
    return line


# Flags that only run, track or print a trial: they go with --from-run; the rest build the trial.
_RUN_FLAGS = {
    "from_run",
    "set_",
    "tracking_uri",
    "experiment",
    "track",
    "as_json",
    "checkpoint_dir",
    "resume",
}


def _refuse_trial_flags(ctx: typer.Context) -> None:
    """--from-run takes the trial from the run: a trial flag given beside it is one clear line."""
    given = [
        param.opts[0]
        for param in ctx.command.params
        if param.name not in _RUN_FLAGS
        and getattr(ctx.get_parameter_source(param.name), "name", "") == "COMMANDLINE"
    ]
    if given:
        raise UserError(
            f"--from-run: {', '.join(given)} would change the logged trial; change it with --set KEY=VALUE "
            "(e.g. --set train.device=cpu), or leave --from-run out"
        )


def _layers(text: str) -> str | list[int]:
    """--distill-layers: `all` or a comma list of block numbers."""
    if text == "all":
        return text
    try:
        return [int(k) for k in text.split(",")]
    except ValueError:
        raise UserError(f"--distill-layers: {text!r} is not `all` or a list like 1,2,4") from None
