"""`train.train_flops`: a trial trains until it has spent a FLOP budget (an isoFLOP study's
unit), passing over the data as often as that takes, its lr schedule ending at the budget."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vitscale.study.checks import check_study
from vitscale.study.spec import StudySpec
from vitscale.train import TrialConfig, fit
from vitscale.train.budget import budget_plan, epochs_plan

BATCH = 64  # tiny_trial: 256 images, batches of 64: 4 steps per epoch


@pytest.mark.parametrize(
    ("batches_bought", "epochs", "last_steps"),
    [(10.0, 3, 2), (8.0, 2, 4), (0.2, 1, 1), (10.4, 3, 2), (10.6, 3, 3)],
)
def test_a_budget_is_whole_batches_laid_out_as_passes(batches_bought, epochs, last_steps):
    plan = budget_plan(batches_bought * 100.0 * BATCH, 100.0, BATCH, steps_per_epoch=4)
    assert (plan.epochs, plan.last_epoch_steps) == (epochs, last_steps)
    assert plan.total_steps == max(1, round(batches_bought))
    assert [plan.steps_in(e) for e in range(1, epochs + 1)] == [4] * (epochs - 1) + [last_steps]
    assert epochs_plan(3, 4).total_steps == 12


@pytest.mark.parametrize("regime", ["discrete", "ode"])
def test_a_budgeted_trial_spends_its_budget_and_ends_its_schedule_there(tiny_trial, regime):
    model = {"regime": regime} | ({"ode": {"solver": "rk4", "step_size": 0.25}} if regime == "ode" else {})
    # fixed-step: the NFE is known, and a training image costs three forwards
    per_image = 3 * fit(tiny_trial(model=model, train={"epochs": 1})).metrics["flops_per_image"]
    budget = 10.5 * BATCH * per_image  # 10 whole batches: 2 passes of 4, then 2 of the third
    trial = tiny_trial(model=model, train={"epochs": None, "train_flops": budget, "min_lr_ratio": 0.0})
    assert trial.resolved().train.epochs is None  # no recipe default: the budget decides
    result = fit(trial)
    assert [m["epoch"] for m in result.history] == [1, 2, 3]
    assert [m["images_seen"] for m in result.history] == [256, 512, 640]
    assert result.metrics["train_flops"] == pytest.approx(10 * BATCH * per_image, rel=1e-6)
    assert abs(result.metrics["train_flops"] - budget) <= 0.5 * BATCH * per_image
    assert all(m["planned_epochs"] == 3 for m in result.history)
    assert result.metrics["lr"] == pytest.approx(0.0, abs=1e-12)  # the cosine ended at the budget
    assert "test_top1" in result.metrics  # the last (partial) pass is the last epoch


def test_a_trial_takes_epochs_or_a_budget_not_both(tiny_trial):
    with pytest.raises(ValidationError, match="train.train_flops sets how long"):
        tiny_trial(train={"epochs": 3, "train_flops": 1e9})
    assert tiny_trial(train={"epochs": None, "train_flops": 1e9}).train.length() == "train_flops 1e+09"
    assert TrialConfig(train={"epochs": 4}).train.length() == "4 epochs"


def _study(scheduler: str) -> StudySpec:
    return StudySpec.model_validate(
        {
            "name": "iso",
            "trial": {"data": {"dataset": "digits"}, "train": {"train_flops": 1e10}},
            "space": {"model.width": {"grid": [16, 32]}},
            "search": {"algorithm": "grid"},
            "scheduler": {"type": scheduler},
        }
    )


def test_epoch_rungs_are_refused_beside_a_budget_and_fifo_is_accepted():
    problems = check_study(_study("asha"))
    assert [(p.key, "rungs count epochs" in p.message) for p in problems] == [("scheduler.type", True)]
    assert check_study(_study("fifo")) == []
