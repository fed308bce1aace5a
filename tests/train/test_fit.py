"""`fit`: reports, determinism, exact resume, failure paths that leave the last checkpoint intact."""

from __future__ import annotations

import hashlib

import pytest
import torch

from vitscale.errors import SolverError, TrialDiverged
from vitscale.tracking.layout import CURVE_TEST_TOP1
from vitscale.tracking.predictions import read_predictions
from vitscale.train import REPORTED_METRICS, fit
from vitscale.train.checkpoint import CHECKPOINT_FILE, load_checkpoint


class Stop(Exception):
    """Stands in for a killed worker after an epoch's checkpoint is written."""


def test_reports_every_metric_each_epoch(tiny_trial):
    seen = []
    result = fit(
        tiny_trial(model={"regime": "ode", "ode": {"solver": "rk4", "step_size": 0.5}}),
        report=lambda m, _d: seen.append(m),
    )
    assert [m["epoch"] for m in seen] == [1.0, 2.0, 3.0]
    for metrics in seen:
        assert set(REPORTED_METRICS) <= set(metrics)
        assert 0 <= metrics["val_top1"] <= metrics["val_top5"] <= 1
        assert metrics["nfe_mean"] == 8  # rk4: 4 evaluations per step, 2 steps over [0, depth=1]
    assert result.metrics == seen[-1]
    assert result.model_config.num_classes == 10 and result.model_config.in_chans == 1


def test_non_ode_models_report_no_nfe(tiny_trial):
    result = fit(tiny_trial(train={"epochs": 1}))
    assert "nfe_mean" not in result.metrics


def test_test_curve_evaluates_test_every_epoch_and_changes_nothing_else(tiny_trial):
    """`train.test_curve`: curve_test_top1 after every epoch, the last equal to test_top1; the
    training itself (losses, validation) is the same as without it."""
    plain = fit(tiny_trial(train={"epochs": 2})).history
    curve = fit(tiny_trial(train={"epochs": 2, "test_curve": True})).history
    assert all(CURVE_TEST_TOP1 in m for m in curve) and not any(CURVE_TEST_TOP1 in m for m in plain)
    assert curve[-1][CURVE_TEST_TOP1] == curve[-1]["test_top1"]
    for a, b in zip(plain, curve, strict=True):
        assert (a["train_loss"], a["val_top1"]) == (b["train_loss"], b["val_top1"])


def test_same_seed_same_metrics(tiny_trial):
    a = fit(tiny_trial(train={"epochs": 2})).history
    b = fit(tiny_trial(train={"epochs": 2})).history
    strip = [{k: v for k, v in m.items() if "second" not in k and k != "peak_memory_mb"} for m in a]
    assert strip == [{k: v for k, v in m.items() if "second" not in k and k != "peak_memory_mb"} for m in b]


def test_learns_digits(tiny_trial):
    result = fit(
        tiny_trial(
            model={"width": 32},
            data={"num_train": None, "num_val": None, "crop_padding": 0},
            train={"epochs": 12, "batch_size": 32, "lr": 5e-3, "label_smoothing": 0.0},
        )
    )
    assert result.metrics["val_top1"] > 0.5  # chance is 0.1; a few seconds of training


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
@pytest.mark.parametrize("regime", ["discrete", "ode"])
def test_resume_equals_uninterrupted(tiny_trial, tmp_path, regime, precision):
    config = tiny_trial(
        model={"regime": regime, "ode": {"solver": "midpoint"}}, train={"precision": precision}
    )
    straight = fit(config).history

    def stop_after_two(metrics, _dir):
        if metrics["epoch"] == 2:
            raise Stop

    with pytest.raises(Stop):
        fit(config, report=stop_after_two, checkpoint_dir=tmp_path)
    assert load_checkpoint(tmp_path / CHECKPOINT_FILE).epoch == 2
    resumed = fit(config, checkpoint_dir=tmp_path).history
    timing = ("epoch_seconds", "train_images_per_second", "peak_memory_mb")
    assert [{k: v for k, v in m.items() if k not in timing} for m in resumed] == [
        {k: v for k, v in m.items() if k not in timing} for m in straight
    ]


def test_resume_at_the_end_reports_the_final_epoch_again(tiny_trial, tmp_path):
    config = tiny_trial(train={"epochs": 1})
    fit(config, checkpoint_dir=tmp_path / "first")
    seen = []
    # As a restored Ray trial: resume from one folder, new checkpoints would go to another.
    fit(
        config,
        report=lambda m, d: seen.append((m, d)),
        checkpoint_dir=tmp_path / "new",
        resume_from=tmp_path / "first",
    )
    assert [(m["epoch"], d) for m, d in seen] == [(1.0, tmp_path / "first")]


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_divergence_names_epoch_and_step_and_keeps_the_checkpoint(tiny_trial, tmp_path):
    """NaN logits from epoch 2 on (injected with a global forward hook after epoch 1's report)."""
    handles = []

    def poison_after_epoch_one(metrics, _dir):
        if metrics["epoch"] == 1:
            before.append(_digest(tmp_path / CHECKPOINT_FILE))
            handles.append(
                torch.nn.modules.module.register_module_forward_hook(
                    lambda module, _inp, out: (
                        out * float("nan") if isinstance(module, torch.nn.Linear) else out
                    )
                )
            )

    before: list[str] = []
    try:
        with pytest.raises(TrialDiverged, match=r"epoch 2, within steps 1-\d+"):
            fit(tiny_trial(train={"epochs": 3}), report=poison_after_epoch_one, checkpoint_dir=tmp_path)
    finally:
        for handle in handles:
            handle.remove()
    assert _digest(tmp_path / CHECKPOINT_FILE) == before[0]
    state = load_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert state.epoch == 1 and all(torch.isfinite(v).all() for v in state.model.values())


def test_a_huge_learning_rate_diverges_in_the_first_epoch(tiny_trial, tmp_path):
    with pytest.raises(TrialDiverged, match=r"non-finite at epoch 1, within steps \d+-\d+") as info:
        fit(tiny_trial(train={"lr": 1e30, "grad_clip": None, "warmup_epochs": 0}), checkpoint_dir=tmp_path)
    assert info.value.reason == "diverged"
    assert not (tmp_path / CHECKPOINT_FILE).exists()


def test_solver_failure_is_a_trial_failure_with_the_settings(tiny_trial, tmp_path):
    config = tiny_trial(
        model={"regime": "ode", "ode": {"solver": "dopri5", "rtol": 1e-12, "atol": 1e-12, "max_num_steps": 3}}
    )
    with pytest.raises(SolverError, match="dopri5") as info:
        fit(config, checkpoint_dir=tmp_path)
    assert info.value.reason == "solver_error"
    assert not (tmp_path / CHECKPOINT_FILE).exists()


def test_test_split_is_evaluated_once_at_the_end(tiny_trial):
    seen = []
    result = fit(tiny_trial(), report=lambda m, _d: seen.append(m))
    assert all("test_top1" not in m for m in seen[:-1])  # never during training: nothing can select on it
    final = result.metrics
    assert {"test_top1", "test_top5", "test_loss", "did_not_train"} <= set(final)
    assert 0 <= final["test_top1"] <= final["test_top5"] <= 1 and final["did_not_train"] in (0.0, 1.0)


def test_without_evaluate_test_no_test_image_is_scored_and_training_is_unchanged(tiny_trial, tmp_path):
    """`train.evaluate_test: false` (a comparison's tuning trials): no test metric, no test
    predictions, the rest of the run the same as with it."""
    plain = fit(tiny_trial(train={"epochs": 2}))
    selection_only = fit(tiny_trial(train={"epochs": 2, "evaluate_test": False}), checkpoint_dir=tmp_path)
    assert not any(key.startswith("test_") for key in selection_only.metrics)
    assert "test" not in selection_only.predictions and "val" in selection_only.predictions
    assert "did_not_train" in selection_only.metrics
    for a, b in zip(plain.history, selection_only.history, strict=True):
        assert (a["train_loss"], a["val_top1"]) == (b["train_loss"], b["val_top1"])


def test_a_test_curve_without_the_test_pass_is_refused(tiny_trial):
    with pytest.raises(ValueError, match="train.test_curve needs train.evaluate_test"):
        tiny_trial(train={"test_curve": True, "evaluate_test": False})


def test_a_model_stuck_at_chance_is_flagged(tiny_trial):
    # timm's init (std 0.02) scores every class alike, so an untrained model sits at chance; the
    # scaled init's random features score 12.5 % on these 128 images by luck, which is no flag
    stuck = fit(tiny_trial(model={"init": "timm"}, train={"epochs": 1, "lr": 1e-12, "warmup_epochs": 0}))
    assert stuck.metrics["did_not_train"] == 1.0
    trained = fit(
        tiny_trial(model={"width": 32}, data={"num_train": None}, train={"epochs": 4, "batch_size": 32})
    )
    assert trained.metrics["val_top1"] > 0.2 and trained.metrics["did_not_train"] == 0.0


def test_ode_flops_follow_the_measured_nfe(tiny_trial):
    """flops_per_image = FLOPs outside the ODE + one field evaluation x the validation NFE."""
    from vitscale.models import build, regime_flops_split
    from vitscale.train.loop import trial_model_config

    config = tiny_trial(model={"regime": "ode", "ode": {"solver": "dopri5", "rtol": 1e-4, "atol": 1e-5}})
    result = fit(config)
    model = build(result.model_config)
    outside, per_eval = regime_flops_split(model, 16)
    assert per_eval > 0 and outside > 0
    for metrics in result.history:
        nfe = metrics["val_nfe_mean"]
        assert nfe >= 6 and metrics["flops_per_image"] == pytest.approx(outside + per_eval * nfe)
    fixed = fit(
        tiny_trial(model={"regime": "ode", "ode": {"solver": "rk4", "step_size": 0.5}}, train={"epochs": 1})
    )
    assert fixed.metrics["val_nfe_mean"] == 8
    assert fixed.metrics["flops_per_image"] == pytest.approx(outside + per_eval * 8)
    assert trial_model_config is not None


def test_adjoint_backward_evaluations_are_counted(tiny_trial):
    config = tiny_trial(
        model={"regime": "ode", "ode": {"solver": "rk4", "step_size": 0.5, "adjoint": True}},
        train={"epochs": 1},
    )
    metrics = fit(config).metrics
    assert metrics["nfe_mean"] == 8 and metrics["nfe_backward_mean"] >= 8  # the adjoint solve runs back


def test_a_finished_trial_writes_per_image_predictions_that_match_its_metrics(tiny_trial, tmp_path):
    """Paired comparisons need each image's result: `predictions/{val,test}.parquet` beside the last
    checkpoint (what a Tune trial's storage copy carries), in split order, counting as top-1 did."""
    result = fit(tiny_trial(train={"epochs": 1}), checkpoint_dir=tmp_path)
    for split in ("val", "test"):
        table = read_predictions(tmp_path / "predictions" / f"{split}.parquet")
        correct = table.column("correct").to_numpy()
        assert table.column("index").to_pylist() == list(range(table.num_rows))
        assert correct.mean() == pytest.approx(result.metrics[f"{split}_top1"], abs=1e-6)
        assert set(result.predictions[split]) == {"index", "label", "predicted"}
    assert table.num_rows == len(result.predictions["test"]["label"]) > 300  # digits: its fixed test fifth
