"""A trial restored from a damaged checkpoint trains again from epoch 0 and says so: in its result
(which the driver's callback turns into the child run's tag) and without doubled epochs in MLflow.
Unit level: the trainable's restore path (`fit_from`) and the callback, no Ray study."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from vitscale.tracking import layout, queued
from vitscale.tracking.tune_callback import (
    RESULT_DISCARDED_CHECKPOINT,
    MlflowStudyCallback,
    TrialDescription,
)
from vitscale.train import TrialConfig
from vitscale.train.checkpoint import CHECKPOINT_FILE, DamagedCheckpoint, load_checkpoint
from vitscale.train.loop import fit
from vitscale.tune.trainable import fit_from

TRIAL = TrialConfig.model_validate(
    {
        "model": {"mixer": "attention", "width": 16, "depth": 1, "heads": 2, "patch_size": 4},
        "data": {"dataset": "digits", "resolution": 16, "num_train": 128, "num_val": 64},
        "train": {"epochs": 2, "batch_size": 64, "threads": 1, "warmup_epochs": 0.5, "lr": 3e-3},
    }
)


def _trained(folder: Path) -> list[dict]:
    reports = []
    fit(TRIAL, report=lambda m, _c: reports.append(dict(m)), checkpoint_dir=folder)
    return reports


@pytest.mark.parametrize("damage", ["truncated", "garbled"])
def test_a_damaged_checkpoint_restarts_its_trial_from_epoch_0(tmp_path, damage):
    first = _trained(tmp_path / "first")
    checkpoint = tmp_path / "first" / CHECKPOINT_FILE
    data = checkpoint.read_bytes()
    checkpoint.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:100] + b"\0" * 400)
    with pytest.raises(DamagedCheckpoint, match=CHECKPOINT_FILE):
        load_checkpoint(checkpoint)

    extra, reports = {}, []
    source = "results/study/run/trial_00000/checkpoint_000001"
    fit_from(
        TRIAL,
        lambda m, _c: reports.append(dict(m)),
        tmp_path / "again",
        tmp_path / "first",
        source,
        extra,
    )
    assert [r["epoch"] for r in reports] == [1, 2]  # from scratch, every epoch
    assert [r["val_loss"] for r in reports] == [r["val_loss"] for r in first]  # the same epochs again
    assert extra[RESULT_DISCARDED_CHECKPOINT].startswith(f"{source}: ")


def test_a_sound_checkpoint_still_resumes(tmp_path):
    _trained(tmp_path / "first")
    extra, reports = {}, []
    fit_from(TRIAL, lambda m, _c: reports.append(dict(m)), tmp_path / "again", tmp_path / "first", "", extra)
    assert [r["epoch"] for r in reports] == [2]  # resumed at its end: the final epoch reported again
    assert RESULT_DISCARDED_CHECKPOINT not in extra


def test_the_child_run_is_tagged_once_and_no_epoch_is_logged_twice(tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    experiment_id = MlflowClient(uri).create_experiment("damaged")
    callback = MlflowStudyCallback(
        uri,
        experiment_id,
        "parent",
        "damaged",
        "train",
        describe=lambda config: TrialDescription("t", {}, "key"),
        run_tags={},
    )
    trial = SimpleNamespace(trial_id="t0", config={}, remote_experiment_path=str(tmp_path / "execution"))
    results = [{"epoch": e, "val_loss": 1.0 / e} for e in (1, 2, 3)]  # before the damage
    discarded = {RESULT_DISCARDED_CHECKPOINT: "checkpoint_000002: RuntimeError: corrupted"}
    results += [{"epoch": e, "val_loss": 1.0 / e, **discarded} for e in (1, 2, 3, 4)]  # restarted
    for result in results:
        callback.on_trial_result(0, [trial], trial, result)
    queued.close_all(timeout=60)

    (run,) = MlflowClient(uri).search_runs([experiment_id])
    assert run.data.tags[layout.DISCARDED_CHECKPOINT] == discarded[RESULT_DISCARDED_CHECKPOINT]
    history = MlflowClient(uri).get_metric_history(run.info.run_id, "val_loss")
    assert sorted(m.step for m in history) == [1, 2, 3, 4]
