"""Gaussian-process BO (`gp`), and what a sampler is told of a point the scheduler stopped early."""

from __future__ import annotations

import math

import optuna
import pytest
from study_helpers import REPO
from test_replicates import RecordingSearcher

from vitscale.study import load_study, suggest_point
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


def test_a_point_stopped_early_is_told_pruned_and_a_finished_one_complete():
    inner = RecordingSearcher()
    searcher = ReplicatedSearcher(inner, seeds=[0], metrics=["val_top1"], modes=["max"])
    searcher.suggest("a")
    searcher.suggest("b")
    searcher.on_trial_complete("a", {"val_top1": 0.4, "epoch": 1, "planned_epochs": 4, "failure_reason": ""})
    searcher.on_trial_complete("b", {"val_top1": 0.6, "epoch": 4, "planned_epochs": 4, "failure_reason": ""})
    assert inner.told[0] == ("a", None, False)  # Ray's OptunaSearch: no value, no error = PRUNED
    assert inner.told[1][0] == "b" and inner.told[1][1]["val_top1"] == 0.6


def test_a_trial_stopped_while_paused_is_told_pruned_from_its_last_result():
    """HyperBand stops a paused trial without a result of its own: it is a point stopped early
    (its last reported epoch), not a failure."""
    inner = RecordingSearcher()
    searcher = ReplicatedSearcher(inner, seeds=[0], metrics=["val_top1"], modes=["max"])
    searcher.suggest("a")
    searcher.on_trial_result("a", {"val_top1": 0.4, "epoch": 1, "planned_epochs": 4, "failure_reason": ""})
    searcher.on_trial_complete("a", None)
    assert inner.told == [("a", None, False)]  # PRUNED, not FAIL
