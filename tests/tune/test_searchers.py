"""Gaussian-process BO (`gp`) and BOHB (`bohb`: TPE proposing HyperBand's points, per arm)."""

from __future__ import annotations

import math

import optuna
import pytest
from study_helpers import REPO, vitscale, write_study
from test_replicates import RecordingSearcher

from vitscale.study import load_study, suggest_point
from vitscale.study.errors import SpecError
from vitscale.tune.replicates import ReplicatedSearcher
from vitscale.tune.samplers import SAMPLERS


@pytest.mark.parametrize("objectives", [1, 2])
def test_gp_searches_a_conditional_space_of_every_distribution(objectives):
    """ssog_search's space: ints, log floats, choices and `when:` parameters, past the GP's 10
    random start points, with one objective (log EI) and two (log EHVI)."""
    spec = load_study(REPO / "studies" / "ssog_search.yaml")
    directions = ["maximize", "minimize"][:objectives]
    study = optuna.create_study(sampler=SAMPLERS["gp"](0, objectives), directions=directions)

    def objective(trial):
        point = suggest_point(trial, spec)
        score = -math.log10(point.get("train.lr", 1e-3)) + 0.01 * point.get("model.width", 0)
        return (score, float(len(point)))[:objectives] if objectives > 1 else score

    study.optimize(objective, n_trials=12)
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 12
    assert all(set(t.params) <= set(spec.space) for t in study.trials)


def test_bohb_runs_under_hyperband_and_refuses_another_scheduler(tmp_path):
    space = {"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}}
    spec = load_study(write_study(tmp_path, "bohb", space=space, search={"algorithm": "bohb"}))
    assert spec.scheduler.type == "hyperband" and spec.scheduler.max_t == spec.trial.train.epochs
    spec = load_study(
        write_study(
            tmp_path,
            "bohb2",
            space=space,
            search={"algorithm": "bohb"},
            scheduler={"type": "hyperband", "max_t": 1},
        )
    )
    assert spec.scheduler.max_t == 1
    for scheduler in ({"type": "asha"}, {"type": "fifo"}):
        study = write_study(tmp_path, "bad", space=space, search={"algorithm": "bohb"}, scheduler=scheduler)
        with pytest.raises(SpecError, match="scheduler.type: bohb runs its points under hyperband"):
            load_study(study)


def test_a_point_stopped_early_is_told_pruned_and_a_finished_one_complete():
    inner = RecordingSearcher()
    searcher = ReplicatedSearcher(inner, seeds=[0], metrics=["val_top1"], modes=["max"])
    searcher.suggest("a")
    searcher.suggest("b")
    searcher.on_trial_complete("a", {"val_top1": 0.4, "epoch": 1, "planned_epochs": 4, "failure_reason": ""})
    searcher.on_trial_complete("b", {"val_top1": 0.6, "epoch": 4, "planned_epochs": 4, "failure_reason": ""})
    assert inner.told[0] == ("a", None, False)  # Ray's OptunaSearch: no value, no error = PRUNED
    assert inner.told[1][0] == "b" and inner.told[1][1]["val_top1"] == 0.6


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_small_bohb_study_prunes_what_hyperband_stopped(tmp_path):
    study = write_study(
        tmp_path,
        "bohb-run",
        space={"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}, "model.width": {"choice": [8, 16]}},
        search={"algorithm": "bohb", "num_samples": 4, "max_concurrent_trials": 2},
        scheduler={"reduction_factor": 2},
    )
    storage = tmp_path / "r"
    vitscale(
        "study", "run", str(study), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}",
        "--storage", str(storage), "--num-cpus", "2", "--quiet",
        "--set", "trial.data.num_train=128", "--set", "trial.data.num_val=64", cwd=tmp_path, timeout=840,
    )  # fmt: skip
    [db] = storage.glob("bohb-run/*/optuna.db")
    trials = optuna.load_study(study_name="bohb-run", storage=f"sqlite:///{db}").trials
    states = sorted(t.state.name for t in trials)
    assert len(trials) == 4 and "COMPLETE" in states and "PRUNED" in states, states
    pruned = [t for t in trials if t.state == optuna.trial.TrialState.PRUNED]
    assert all(t.intermediate_values for t in pruned)  # TPE ranks them by how far they got
