"""`vitscale evaluate`: a finished trial's model, read back, evaluated at other input resolutions.

    result = evaluate_trial("3f2a...", [28, 42, 56], tracking_uri="sqlite:///mlflow.db")

The source is an MLflow run id (its `checkpoint/checkpoint.pt` artifact, as `vitscale train` and
`tracking.checkpoints` log it) or a local checkpoint file or folder. The trial's data and
evaluation settings come from the checkpoint (`TrainState.trial_config`); older checkpoints fall
back to the run's `data.*` / `train.*` params or a `trial.json` beside the file. A run gets the
metrics (`test_top1_at56`, ... at the step of its last epoch) and the predictions
(`predictions/test@56.parquet`); a local checkpoint gets the predictions beside it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vitscale import data as vdata
from vitscale.data.config import DataConfig
from vitscale.device import resolve_device
from vitscale.errors import UserError
from vitscale.models import ModelConfig, build
from vitscale.precision import autocast as precision_autocast
from vitscale.tracking import store
from vitscale.tracking.layout import DEFAULT_TRACKING_URI
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT
from vitscale.train.checkpoint import CHECKPOINT_FILE, TrainState, load_checkpoint
from vitscale.train.config import TrainConfig, TrialConfig, resolutions_problem
from vitscale.train.from_mlflow import RUN_ID_PATTERN, download_checkpoint, section_params
from vitscale.train.loop import save_predictions
from vitscale.train.metrics import at_resolution
from vitscale.train.resolution_eval import evaluate_at_resolutions

KEY = "evaluate"  # what an error line names: the positional RUN_ID_OR_CHECKPOINT
TRIAL_FILE = "trial.json"  # beside a `vitscale train --checkpoint-dir` checkpoint (train.resume)
_EVAL_KEYS = ("batch_size", "eval_batch_size", "precision", "amp")  # what evaluation reads of a run's train.*


@dataclass
class TrialEvaluation:
    """One row per resolution ({resolution, grid, tokens, val_top1, test_loss, ...}) and where
    the results went: the MLflow run, or the folder of a local checkpoint."""

    source: str
    checkpoint: Path
    run_id: str | None
    epoch: int
    trained_resolution: int
    patch_size: int
    rows: list[dict[str, Any]] = field(default_factory=list)
    predictions: list[str] = field(default_factory=list)  # artifact paths (run) or files (local)


def check_resolutions(resolutions: Sequence[int], patch_size: int, key: str = "--resolutions") -> None:
    """Every resolution a positive multiple of the patch size (else the token grid would crop)."""
    problem = resolutions_problem(resolutions, patch_size, "the model's patch size")
    if problem:
        raise UserError(f"{key}: {problem}")


def evaluate_trial(
    source: str,
    resolutions: Sequence[int],
    splits: Sequence[str] = ("val", "test"),
    tracking_uri: str | None = None,
    device: str = "auto",
) -> TrialEvaluation:
    """Evaluate the trial `source` names at each resolution and record the results with it."""
    uri = tracking_uri or DEFAULT_TRACKING_URI
    with tempfile.TemporaryDirectory(prefix="vitscale-evaluate-") as tmp:
        checkpoint, run_id, client = _locate(source, uri, Path(tmp))
        state = load_checkpoint(checkpoint)
        params = client.get_run(run_id).data.params if client is not None else {}
        model_config = _model_config(state, params, checkpoint)
        check_resolutions(resolutions, model_config.patch_size)
        trial = _trial_config(state, params, checkpoint, model_config)
        torch_device = resolve_device(device, "--device")
        bundle = vdata.load(trial.data, torch_device)
        model = build(model_config).to(torch_device)
        model.load_state_dict(state.model)
        autocast = precision_autocast(trial.train.precision, torch_device)  # as it was trained
        metrics, predictions = evaluate_at_resolutions(
            model.eval(), bundle, trial, resolutions, splits, autocast
        )
        result = TrialEvaluation(
            source=source,
            checkpoint=checkpoint,
            run_id=run_id,
            epoch=state.epoch,
            trained_resolution=trial.data.resolution,
            patch_size=model_config.patch_size,
            rows=[_row(metrics, r, model_config.patch_size) for r in resolutions],
        )
        if client is None:
            written = save_predictions(checkpoint.parent, predictions)
            result.predictions = [str(p) for p in written]
            return result
        store.log_metrics(client, run_id, metrics, step=state.epoch)
        for path in save_predictions(Path(tmp) / "out", predictions):
            client.log_artifact(run_id, str(path), artifact_path=PREDICTIONS_ARTIFACT)
            result.predictions.append(f"{PREDICTIONS_ARTIFACT}/{path.name}")
        return result


def _locate(source: str, uri: str, tmp: Path) -> tuple[Path, str | None, Any]:
    """(local checkpoint file, run id or None, MLflow client or None)."""
    path = Path(source).expanduser()
    if path.is_dir():
        path = path / CHECKPOINT_FILE
    if path.is_file():
        return path.resolve(), None, None
    if not RUN_ID_PATTERN.match(source):
        raise UserError(
            f"{KEY}: {source!r} is neither a checkpoint file or folder nor an MLflow run id (32 hex digits)"
        )
    store.check_tracking_uri(uri)
    client = store.client_for(uri)
    try:
        client.get_run(source)
    except store.mlflow_exception():
        raise UserError(
            f"{KEY}: no MLflow run {source} at {uri}; check the id (`vitscale ui` lists the runs) "
            "or pass the store it was logged to with --tracking-uri"
        ) from None
    return download_checkpoint(client, source, tmp / source, key=KEY, error=UserError), source, client


def _model_config(state: TrainState, params: dict[str, str], checkpoint: Path) -> ModelConfig:
    raw = state.model_config
    if raw is None and params:  # older checkpoints: the run's model.* params
        raw = section_params(params, "model")
    if raw is None:
        raise UserError(
            f"{KEY}: {checkpoint} does not say what model it holds (a checkpoint older than its "
            "model_config); evaluate the MLflow run that logged it instead"
        )
    return ModelConfig.model_validate(raw)


def _trial_config(
    state: TrainState, params: dict[str, str], checkpoint: Path, model: ModelConfig
) -> TrialConfig:
    """The trial as trained: saved in the checkpoint, else rebuilt from what was logged beside it."""
    if state.trial_config is not None:
        return TrialConfig.model_validate(state.trial_config).resolved()
    beside = checkpoint.parent / TRIAL_FILE
    if beside.is_file():
        return TrialConfig.model_validate_json(beside.read_text()).resolved()
    if not params:
        raise UserError(
            f"{KEY}: {checkpoint} does not say what data it was trained on (no trial config in it, "
            f"no {TRIAL_FILE} beside it); evaluate the MLflow run that logged it instead"
        )
    data = {k: v for k, v in section_params(params, "data").items() if k in DataConfig.model_fields}
    train = {k: v for k, v in section_params(params, "train").items() if k in _EVAL_KEYS}
    return TrialConfig(
        model=model, data=DataConfig.model_validate(data), train=TrainConfig.model_validate(train)
    ).resolved()


def _row(metrics: dict[str, float], resolution: int, patch_size: int) -> dict[str, Any]:
    """One resolution's metrics under their plain names (`test_top1`), with its token grid."""
    side = resolution // patch_size
    suffix = at_resolution("", resolution)
    row: dict[str, Any] = {"resolution": resolution, "grid": [side, side], "tokens": side * side}
    row.update({k.removesuffix(suffix): v for k, v in metrics.items() if k.endswith(suffix)})
    return row
