"""Values that change while a trial trains: a replayed `train.schedule` moves the lr at its epochs,
and a trial continuing another's checkpoint (a PBT exploit) trains on with its own values and
reports the schedule it lived."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from vitscale.tracking.layout import RESULT_SCHEDULE
from vitscale.train import fit
from vitscale.train.hyper_schedule import ScheduleStep, record_step, values_at


def test_a_replayed_schedule_changes_the_lr_at_its_epochs_only(tiny_trial):
    plain = fit(tiny_trial(train={"epochs": 4})).history
    steps = [{"epoch": 3, "values": {"train.lr": 6e-3}}]
    replayed = fit(tiny_trial(train={"epochs": 4, "schedule": steps})).history
    assert [m["lr"] for m in replayed[:2]] == [m["lr"] for m in plain[:2]]
    assert [m["train_loss"] for m in replayed[:2]] == [m["train_loss"] for m in plain[:2]]
    for epoch in (2, 3):  # the peak doubled (3e-3 -> 6e-3), the cosine factor went on
        assert math.isclose(replayed[epoch]["lr"], 2 * plain[epoch]["lr"], rel_tol=1e-9)
    lived = json.loads(replayed[-1][RESULT_SCHEDULE])
    assert [(s["epoch"], s["values"]["train.lr"]) for s in lived] == [(1, 3e-3), (3, 6e-3)]
    assert RESULT_SCHEDULE not in plain[-1]  # nothing changed: nothing to record


def test_a_schedule_replayed_from_epoch_one_equals_training_with_its_values(tiny_trial):
    direct = fit(tiny_trial(train={"epochs": 2, "lr": 5e-3})).history
    steps = [{"epoch": 1, "values": {"train.lr": 5e-3}}]
    replayed = fit(tiny_trial(train={"epochs": 2, "schedule": steps})).history
    assert [m["train_loss"] for m in replayed] == [m["train_loss"] for m in direct]


def test_continuing_another_trials_checkpoint_trains_on_with_its_own_values(tiny_trial, tmp_path):
    donor = tiny_trial(train={"epochs": 4})
    _train_epochs(donor, tmp_path / "donor", 2)
    clone = tiny_trial(train={"epochs": 4, "lr": 1.5e-3, "label_smoothing": 0.05})
    history = fit(
        clone, checkpoint_dir=tmp_path / "clone", resume_from=tmp_path / "donor", continued_from="donor_00001"
    ).history
    whole = fit(donor).history
    assert [m["train_loss"] for m in history[:2]] == [m["train_loss"] for m in whole[:2]]
    assert math.isclose(history[2]["lr"], whole[2]["lr"] / 2, rel_tol=1e-9)
    lived = json.loads(history[-1][RESULT_SCHEDULE])
    assert lived[0]["values"]["train.lr"] == 3e-3 and "cloned_from" not in lived[0]
    assert lived[1] == {
        "epoch": 3,
        "values": {**lived[0]["values"], "train.lr": 1.5e-3, "train.label_smoothing": 0.05},
        "cloned_from": "donor_00001",
    }


def test_resuming_a_trials_own_checkpoint_adds_no_step(tiny_trial, tmp_path):
    config = tiny_trial(train={"epochs": 3})
    _train_epochs(config, tmp_path, 1)
    assert RESULT_SCHEDULE not in fit(config, checkpoint_dir=tmp_path).history[-1]


def test_only_values_a_trained_model_can_carry_on_with_may_be_scheduled():
    with pytest.raises(ValidationError, match="model.width: cannot change while a trial trains"):
        ScheduleStep(epoch=2, values={"model.width": 32})


def test_values_at_applies_the_steps_begun_by_then_and_record_step_skips_repeats():
    steps = [ScheduleStep(epoch=3, values={"train.lr": 2.0}), ScheduleStep(epoch=1, values={"train.lr": 1.0})]
    assert [values_at({"train.lr": 9.0}, steps, e)["train.lr"] for e in (1, 2, 3, 4)] == [1.0, 1.0, 2.0, 2.0]
    lived: list = []
    assert record_step(lived, 1, {"train.lr": 1.0})
    assert not record_step(lived, 2, {"train.lr": 1.0})
    assert record_step(lived, 2, {"train.lr": 1.0}, cloned_from="t_00002")


class _Stop(Exception):
    pass


def _train_epochs(config, folder, epochs: int) -> None:
    """Train `config` into `folder` and stop after `epochs` (its checkpoint is on disk by then)."""

    def report(metrics, _checkpoint):
        if metrics["epoch"] >= epochs:
            raise _Stop

    with pytest.raises(_Stop):
        fit(config, checkpoint_dir=folder, report=report)
