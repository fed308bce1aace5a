"""A study's child runs carry their trial's logs and, for the best configuration per arm (by
validation), a final checkpoint that `load_from_mlflow` turns back into the trained model; the
same study mirrors its trials to W&B offline. Plus the choice of "best" on its own."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))

from study_helpers import child_runs, vitscale, write_study  # noqa: E402

from vitscale.tracking.layout import CHECKPOINT  # noqa: E402
from vitscale.tracking.trial_artifacts import choose_best  # noqa: E402
from vitscale.train.from_mlflow import load_from_mlflow  # noqa: E402


def _entry(arm, key, value, params=1.0):
    return {"arm": arm, "config_key": key, "metrics": {"val_top1": value, "params": params}}


def test_best_is_the_best_seed_mean_per_arm_and_the_pareto_set_for_several_objectives():
    entries = [
        _entry("a", "lr1", 0.9),
        _entry("a", "lr1", 0.1),  # mean 0.5
        _entry("a", "lr2", 0.6),
        _entry("a", "lr2", 0.6),  # mean 0.6: a's best, both seeds
        _entry("b", "lr1", 0.3),
        _entry("b", "lr2", float("nan")),  # diverged: never chosen
    ]
    chosen = choose_best(entries, [("val_top1", "max")])
    assert [(e["arm"], e["config_key"]) for e in chosen] == [("a", "lr2"), ("a", "lr2"), ("b", "lr1")]
    front = choose_best(
        [_entry("a", "x", 0.9, 100), _entry("a", "y", 0.8, 10), _entry("b", "z", 0.7, 50)],
        [("val_top1", "max"), ("params", "min")],
    )
    assert sorted(e["config_key"] for e in front) == ["x", "y"]  # z: worse than y on both


@pytest.mark.slow
def test_study_logs_the_best_checkpoint_per_arm_the_trial_logs_and_a_wandb_offline_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    study = write_study(
        tmp_path,
        "artifacts-tiny",
        space={"model.mixer": {"grid": ["attention", "ssog"]}, "train.lr": {"grid": [3.0e-3, 1.0e-2]}},
        search={"algorithm": "grid", "max_concurrent_trials": 2},
        tracking={"checkpoints": "best", "wandb": {"project": "vitscale-test", "mode": "offline"}},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "results"),
        "--num-cpus", "2", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = child_runs(uri, "artifacts-tiny")
    assert len(runs) == 4
    for run in runs:  # every trial's stdout and stderr
        logs = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, "logs")}
        assert logs == {"stdout", "stderr"}, run.info.run_name
    best = [r for r in runs if r.data.tags.get(CHECKPOINT) == "best"]
    by_arm = {}
    for run in runs:
        arm = run.data.params["model.mixer"]
        by_arm.setdefault(arm, []).append(run)
    assert sorted(r.data.params["model.mixer"] for r in best) == ["attention", "ssog"]
    for run in best:  # each the best of its arm by validation
        arm_runs = by_arm[run.data.params["model.mixer"]]
        assert run.data.metrics["val_top1"] == max(r.data.metrics["val_top1"] for r in arm_runs)
    for run in runs:
        if run not in best:
            assert not client.list_artifacts(run.info.run_id, "checkpoint")

    # The logged model reproduces its run's validation accuracy.
    import torch

    from vitscale import data as vdata
    from vitscale.train import TrialConfig
    from vitscale.train.evaluate import evaluate
    from vitscale.train.from_mlflow import trial_from_run

    run = best[0]
    model = load_from_mlflow(run.info.run_id, uri)
    config = TrialConfig.model_validate(trial_from_run(run.info.run_id, uri)).resolved()
    bundle = vdata.load(config.data, torch.device("cpu"))
    with torch.no_grad():
        metrics = evaluate(model, bundle, config)
    assert metrics["val_top1"] == pytest.approx(run.data.metrics["val_top1"], abs=1e-6)

    offline = list((tmp_path / "wandb").rglob("offline-run-*"))
    assert len(offline) == 4, offline  # one W&B run folder per trial, no network
