"""A finished trial's model as an MLflow Model (pytorch flavour): what the trial leaves for it, and
how the driver's write queue logs it.

The trial writes, at its last epoch and beside its final checkpoint, `served/model.pt` (the
trained model wrapped so that it takes the data set's uint8 images, (N, C, H, W) at any size, and
returns logits: evaluation's resize and normalisation are inside; `train.served_model`) and
`served/input_example.npy` (the first test image); the names are layout.SERVED_*. The driver's
callback queues one `log_model` write per trial that ran all its planned epochs
(`tracking.tune_callback`); the queue's sender (`tracking.replay`) calls `log_served_model`, which
logs it with `mlflow.pytorch.log_model` as a LoggedModel named LOGGED_MODEL_NAME, linked to the
trial's run at its last epoch (the run's metrics of that step, val and test top-1 included, are
the model's), with a signature and the input example. `mlflow.pytorch.load_model("models:/<model
id>")` (or `runs:/<run id>/model`) gives it back. It is pickled ("pickle" format): loading needs
vitscale importable and, like any pickle, runs code, so load models from stores you trust.
MLflow's default "pt2" (torch.export) loads safely but cost 2-4x the CPU per model here and fixed
the batch size to the example's one image.

Logging a model must never fail a trial nor stop a study: a model that cannot be read or saved is
named in one warning line and skipped; only the tracking server's own failures are retried, like
every queued write (an outage), and a write the server refuses is set aside (rejected.jsonl).
Cost: one small pickle and one forward pass of one image per finished trial, on the sender thread
(0.16 s of CPU for a quickstart-size model; "pt2" took 0.3-0.8 s).
"""

from __future__ import annotations

import logging
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import mlflow
import mlflow.pytorch
import numpy as np
import torch
from mlflow.exceptions import MlflowException
from mlflow.models import infer_signature

from vitscale.tracking import layout

# What the pytorch flavour's environment pins; vitscale itself is not on PyPI: load where it is installed.
REQUIREMENTS = ("torch", "cloudpickle", "numpy", "torchdiffeq")
log = logging.getLogger("vitscale.tracking")


def _not_the_pickle_caution(record: logging.LogRecord) -> bool:
    """MLflow warns once per pickled model that unpickling runs code: said once, in this module's
    docstring, instead of once per trial in the study's terminal."""
    return not str(record.msg).startswith("Saving pytorch model by Pickle")


logging.getLogger("mlflow.pytorch").addFilter(_not_the_pickle_caution)


def logged_models(client, run_id: str, name: str = layout.LOGGED_MODEL_NAME, ready: bool = True) -> list:
    """The LoggedModels called `name` that `run_id` produced, newest first: the READY ones, or
    (ready=False) those an interrupted attempt left PENDING or FAILED."""
    experiment_id = client.get_run(run_id).info.experiment_id
    found = client.search_logged_models(
        experiment_ids=[experiment_id],
        filter_string=f"source_run_id = '{run_id}' AND name = '{name}'",
        order_by=[{"field_name": "creation_time", "ascending": False}],
    )
    return [m for m in found if str(m.status).endswith("READY") == ready]


def requirements() -> list[str]:
    """REQUIREMENTS pinned to the versions installed here (those installed)."""
    pinned = []
    for name in REQUIREMENTS:
        try:
            pinned.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            continue
    return pinned


def log_served_model(
    client, tracking_uri: str, run_id: str, folder: str, name: str, step: int, look_first: bool
) -> str | None:
    """Log the served model in `folder` (layout.SERVED_DIR) as the LoggedModel `name` of `run_id` at
    `step`; its model id, or None when it was skipped (warned). `look_first`: an earlier attempt
    may have got through, so a READY model of this run and name ends it."""
    if look_first:
        done = logged_models(client, run_id, name)
        if done:
            return done[0].model_id
        for left in logged_models(client, run_id, name, ready=False):
            client.delete_logged_model(left.model_id)  # an attempt cut short: its model is incomplete
    try:
        model = torch.load(Path(folder) / layout.SERVED_MODEL_FILE, map_location="cpu", weights_only=False)
        example = np.load(Path(folder) / layout.INPUT_EXAMPLE_FILE)
        with torch.inference_mode():
            output = model(torch.from_numpy(example)).numpy()
    except Exception as exc:  # noqa: BLE001 - the trial's own file, read here: a bad one is skipped
        log.warning("run %s: its model is not logged (%s: %s)", run_id, folder, _first_line(exc))
        return None
    experiment_id = client.get_run(run_id).info.experiment_id
    if mlflow.get_tracking_uri() != tracking_uri:  # the flavour's own calls use the global store
        mlflow.set_tracking_uri(tracking_uri)
    # Created here, in the run's experiment: left to itself, log_model would put it in the
    # active (default) experiment of this driver, not the run's.
    logged = client.create_logged_model(experiment_id, name=name, source_run_id=run_id)
    try:
        mlflow.pytorch.log_model(
            pytorch_model=model,
            name=name,
            signature=infer_signature(example, output),
            input_example=example,
            pip_requirements=requirements(),
            serialization_format="pickle",  # not MLflow's default "pt2": see the module docstring
            metadata={"vitscale_input": "uint8 images (N, C, H, W), any size: resized and normalised inside"},
            model_id=logged.model_id,
            run_id=run_id,
            step=step,
        )
    except (MlflowException, OSError):
        raise  # the server or the store: the queue retries (or sets a refused write aside)
    except Exception as exc:  # noqa: BLE001 - pickling, the flavour's own checks: never the study's end
        log.warning("run %s: its model is not logged (%s)", run_id, _first_line(exc))
        client.delete_logged_model(logged.model_id)
        return None
    return logged.model_id


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__
