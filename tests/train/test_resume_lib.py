"""`vitscale.train.resume.train_trial`: a checkpoint folder belongs to one run; resume continues it."""

from __future__ import annotations

import json

import pytest
from mlflow import MlflowClient

from vitscale.errors import UserError
from vitscale.study import flatten
from vitscale.train.resume import CONFIG_FILE, RUN_ID_FILE, train_trial, trial_params


def test_a_tracked_run_resumes_in_the_same_mlflow_run_logging_each_epoch_once(tiny_trial, tmp_path):
    config = tiny_trial(train={"epochs": 2}).resolved()
    uri, ckpt = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "ckpt"
    first = train_trial(config, checkpoint_dir=ckpt, tracking_uri=uri, experiment="e", show_progress=False)
    run_id = (ckpt / RUN_ID_FILE).read_text().strip()
    assert first["mlflow_run_id"] == run_id and first["epoch"] == 2
    # the config as it ran: train.precision `auto` resolved for this device (its CPU's)
    assert json.loads((ckpt / CONFIG_FILE).read_text()) == config.with_precision("cpu").model_dump(
        mode="json"
    )

    again = train_trial(
        config, checkpoint_dir=ckpt, resume=True, tracking_uri=uri, experiment="e", show_progress=False
    )
    assert again["mlflow_run_id"] == run_id
    client = MlflowClient(tracking_uri=uri)
    assert [m.step for m in client.get_metric_history(run_id, "val_loss")] == [1, 2]
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED" and run.data.params["model.width"] == "16"
    assert [a.path for a in client.list_artifacts(run_id, "checkpoint")] == ["checkpoint/checkpoint.pt"]


def test_resume_refuses_a_changed_config_naming_the_key(tiny_trial, tmp_path):
    train_trial(tiny_trial(train={"epochs": 1}).resolved(), checkpoint_dir=tmp_path, track=False)
    with pytest.raises(UserError, match=r"train\.epochs=1 \(now 2\)"):
        train_trial(tiny_trial(train={"epochs": 2}).resolved(), checkpoint_dir=tmp_path, resume=True)


@pytest.mark.parametrize(
    ("trained", "resume", "message"),
    [
        (False, True, "--resume: needs --checkpoint-dir"),
        (None, True, "holds no checkpoint.pt"),
        (True, False, "already holds a checkpoint; pass --resume"),
    ],
)
def test_checkpoint_folder_mistakes_fail_before_training(tiny_trial, tmp_path, trained, resume, message):
    config = tiny_trial(train={"epochs": 1}).resolved()
    if trained:
        train_trial(config, checkpoint_dir=tmp_path, track=False, show_progress=False)
    folder = None if trained is False else tmp_path
    with pytest.raises(UserError, match=message):
        train_trial(config, checkpoint_dir=folder, resume=resume, track=False)


def test_params_are_the_ones_a_study_logs(tiny_trial):
    config = tiny_trial(train={"distill": {"teacher": "t.pt", "layers": [1]}}).resolved()
    assert trial_params(config) == flatten(config)
