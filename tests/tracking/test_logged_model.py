"""A trial's final model as an MLflow Model: logged once per finished trial through the write queue,
loaded back by MLflow's own pytorch flavour, and evaluating to the test top-1 the trial logged;
each arm's best registered with `--register`; the study's saved runs view. A model that cannot be
logged is skipped with a warning: the queue's other writes go on."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path

import mlflow
import mlflow.pytorch
import numpy as np
import pytest
import torch
from mlflow import MlflowClient

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))
from study_helpers import REPO, TINY_TRIAL, child_runs, vitscale, write_study  # noqa: E402

from vitscale import data as vdata  # noqa: E402
from vitscale.data.config import DataConfig  # noqa: E402
from vitscale.models import ModelConfig, build  # noqa: E402
from vitscale.study import load_study  # noqa: E402
from vitscale.tracking import layout, logged_model, runs_view, store  # noqa: E402
from vitscale.tracking.queued import queued_client  # noqa: E402
from vitscale.train.from_mlflow import trial_from_run  # noqa: E402
from vitscale.train.served_model import save_served_model  # noqa: E402

EPOCHS = 4


def _test_hits(model, bundle, batch_size: int) -> int:
    """Correct test images as `train.evaluate` counts them: batches of the trial's eval batch size,
    the first of the top-k (argmax breaks the ties of a near-chance model's bfloat16 logits
    differently)."""
    k = min(5, bundle.num_classes)
    hits = 0
    with torch.inference_mode():
        for start in range(0, len(bundle.test_labels), batch_size):
            logits = model(bundle.test_images[start : start + batch_size])
            predicted = logits.topk(k, dim=1).indices[:, 0]
            hits += int((predicted == bundle.test_labels[start : start + batch_size]).sum())
    return hits


def _logged_hits(run, bundle) -> int:
    """The run's test_top1 as a count of images (MLflow holds the float32 fraction)."""
    return round(run.data.metrics["test_top1"] * len(bundle.test_labels))


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_each_finished_trial_logs_a_model_that_evaluates_to_its_test_top1_and_the_best_register(tmp_path):
    # Trials that learn (DID_NOT_TRAIN runs are not registered): more images and epochs than TINY_TRIAL.
    trial = {**TINY_TRIAL, "data": {**TINY_TRIAL["data"], "num_train": 600}}
    trial["train"] = {**TINY_TRIAL["train"], "epochs": EPOCHS}
    study = write_study(
        tmp_path,
        "models-tiny",
        trial=trial,
        space={
            "model.mixer": {"grid": ["attention", "ssog"]},
            "model.regime": {"grid": ["discrete", "looped"]},
        },
        search={"algorithm": "grid", "seeds": [0], "max_concurrent_trials": 2},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "results")]
    proc = vitscale(*run, "--num-cpus", "2", "--quiet", "--register", cwd=tmp_path)

    client = MlflowClient(tracking_uri=uri)
    mlflow.set_tracking_uri(uri)
    runs = child_runs(uri, "models-tiny")
    assert len(runs) == 4
    for trial in runs:
        assert trial.data.tags[layout.DID_NOT_TRAIN] == "false", trial.info.run_name
        [output] = trial.outputs.model_outputs  # one model per trial, at its last epoch
        model_info = client.get_logged_model(output.model_id)
        assert (model_info.name, model_info.source_run_id, output.step) == (
            "model",
            trial.info.run_id,
            EPOCHS,
        )
        assert {m.key: m.value for m in model_info.metrics}["test_top1"] == trial.data.metrics["test_top1"]
        loaded = mlflow.pytorch.load_model(f"models:/{output.model_id}")
        params = trial_from_run(trial.info.run_id, uri)
        bundle = vdata.load(DataConfig.model_validate(params["data"]), torch.device("cpu"))
        eval_batch = params["train"].get("eval_batch_size") or 2 * params["train"]["batch_size"]
        assert _test_hits(loaded, bundle, eval_batch) == _logged_hits(trial, bundle), trial.info.run_name
        signature = mlflow.models.get_model_info(f"models:/{output.model_id}").signature
        [spec] = signature.inputs.inputs
        assert (str(spec.type), spec.shape) == ("uint8", (-1, 1, 8, 8))  # digits as stored: 8x8, one channel
        same = mlflow.pytorch.load_model(f"runs:/{trial.info.run_id}/model")
        assert _test_hits(same, bundle, eval_batch) == _logged_hits(trial, bundle)

    # --register: one registered model per arm (mixer x regime), alias `best` on its best run by val.
    lines = [line for line in proc.stdout.splitlines() if line.startswith("registered: ")]
    assert len(lines) == 4, proc.stdout
    for trial in runs:
        arm = layout.train_arm(trial.data.params)
        name = layout.registered_model_name("models-tiny", arm)
        version = client.get_model_version_by_alias(name, "best")
        assert (version.run_id, version.source) == (
            trial.info.run_id,
            f"models:/{trial.outputs.model_outputs[0].model_id}",
        )
        assert version.tags[layout.ARM] == arm
    registered = mlflow.pytorch.load_model("models:/models-tiny-ssog-looped@best")  # the name people type
    assert registered(torch.zeros(2, 1, 8, 8, dtype=torch.uint8)).shape == (2, 10)
    again = vitscale("analyze", str(study), "--tracking-uri", uri, "--register", cwd=tmp_path)
    assert sum(line.startswith("already registered: ") for line in again.stdout.splitlines()) == 4
    assert len(client.search_model_versions("name = 'models-tiny-ssog-looped'")) == 1

    # The study's runs view, saved on its experiment, and its link in the summary.
    experiment = client.get_experiment_by_name("models-tiny")
    view = json.loads(experiment.tags[layout.SAVED_VIEW_PREFIX + "vitscale-models-tiny"])
    state = json.loads(view["state"])
    assert view["name"] == "models-tiny: key metrics"
    assert (
        "metrics.`val_top1`" in state["selectedColumns"] and "metrics.`test_top1`" in state["selectedColumns"]
    )
    assert (
        f"#/experiments/{experiment.experiment_id}/runs?viewStateShareKey=vitscale-models-tiny" in proc.stdout
    )


def _served_folder(tmp_path: Path) -> Path:
    """A served model as a trial leaves it (a tiny untrained ViT on digits)."""
    bundle = vdata.load(DataConfig(dataset="digits", resolution=16), torch.device("cpu"))
    config = ModelConfig(
        width=16, depth=1, heads=2, patch_size=4, num_classes=bundle.num_classes, in_chans=1, image_size=16
    )
    return save_served_model(tmp_path / "checkpoint", build(config).eval(), bundle, 16, "float32")


def test_a_model_logged_again_after_an_interrupted_send_is_not_logged_twice(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = store.client_for(uri)
    run_id = client.create_run(store.ensure_experiment(client, "once")).info.run_id
    folder = _served_folder(tmp_path)
    first = logged_model.log_served_model(client, uri, run_id, str(folder), "model", 1, look_first=False)
    again = logged_model.log_served_model(client, uri, run_id, str(folder), "model", 1, look_first=True)
    assert first == again and [m.model_id for m in logged_model.logged_models(client, run_id)] == [first]
    example = torch.from_numpy(np.load(folder / layout.INPUT_EXAMPLE_FILE))
    assert mlflow.pytorch.load_model(f"models:/{first}")(example).shape == (1, 10)


def test_a_model_that_cannot_be_read_is_skipped_and_the_queue_goes_on(tmp_path, caplog):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = queued_client(uri, tmp_path / "queue")
    experiment = store.ensure_experiment(client, "broken")
    run_id = client.create_run(experiment).info.run_id
    folder = _served_folder(tmp_path)
    (folder / layout.SERVED_MODEL_FILE).write_bytes(b"not a pickle")
    with caplog.at_level(logging.WARNING, logger="vitscale.tracking"):
        client.log_model(run_id, str(folder), "model", 1)
        store.set_tags(client, run_id, {"after": "sent"})
        stats = client.queue.close(timeout=120)
    assert (stats.pending, stats.rejected) == (0, 0)
    real = client.resolve(run_id)
    assert store.client_for(uri).get_run(real).data.tags["after"] == "sent"
    assert logged_model.logged_models(store.client_for(uri), real) == []
    assert any("its model is not logged" in r.getMessage() for r in caplog.records)


def test_the_runs_view_of_a_comparison_shows_its_arms_objective_and_test(tmp_path):
    spec = load_study(REPO / "studies" / "tuned_quickstart.yaml")
    state = runs_view.view_state(spec)
    columns = state["selectedColumns"]
    assert columns[0] == "attributes.`Models`"
    assert {"tags.`vitscale.phase`", "tags.`vitscale.arm`", "metrics.`test_top1`"} <= set(columns)
    assert {f"params.`{key}`" for key in spec.space} <= set(columns)
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`val_top1`", False)
