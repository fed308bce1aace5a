"""HyperBand and median stopping through Ray Tune's own classes, one scheduler per arm (on real
Ray: one small study under HyperBand)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from study_helpers import child_runs, vitscale, write_study

from vitscale.study import load_study
from vitscale.study.errors import SpecError
from vitscale.tracking import layout
from vitscale.tune.arm_asha import ArmScheduler, scheduler_for

TWO_ARMS = {"model.mixer": {"grid": ["attention", "ssog"]}}


class _Trial(SimpleNamespace):
    __hash__ = object.__hash__  # Tune's schedulers keep trials in sets


def _trial(trial_id, mixer):
    return _Trial(trial_id=trial_id, config={"point": {"model.mixer": mixer}, "seed": 0})


def test_median_stopping_compares_trials_of_the_same_arm_only(tmp_path):
    spec = load_study(
        write_study(
            tmp_path, "median", space=TWO_ARMS, scheduler={"type": "median", "min_samples_required": 1}
        ),
        ["trial.train.epochs=4"],
    )
    scheduler = scheduler_for(spec, "val_top1", "max", 4)
    assert isinstance(scheduler, ArmScheduler) and scheduler.kind == "median"
    a1, a2, s1 = _trial("a1", "attention"), _trial("a2", "attention"), _trial("s1", "ssog")
    tune = SimpleNamespace(get_live_trials=lambda: [])  # nothing waiting: no pause to yield time
    for t in (a1, a2, s1):
        scheduler.on_trial_add(tune, t)
    for epoch in (1, 2):
        assert scheduler.on_trial_result(tune, a1, {"epoch": epoch, "val_top1": 0.9}) == "CONTINUE"
    scheduler.on_trial_complete(tune, a1, {"epoch": 2, "val_top1": 0.9})
    # Below attention's median, but alone in its arm: goes on.
    assert scheduler.on_trial_result(tune, s1, {"epoch": 2, "val_top1": 0.1}) == "CONTINUE"
    # Below the median of its own arm: stopped.
    assert scheduler.on_trial_result(tune, a2, {"epoch": 2, "val_top1": 0.1}) == "STOP"


def _hyperband_pair(tmp_path):
    spec = load_study(write_study(tmp_path, "hb", scheduler={"type": "hyperband", "max_t": 2}), [])
    scheduler = scheduler_for(spec, "val_top1", "max", 2)
    stopped = []
    tune = SimpleNamespace(get_live_trials=lambda: [], stop_trial=stopped.append)
    a, b = _trial("a", "attention"), _trial("b", "attention")
    for t in (a, b):
        t.status, t.is_saving = "PENDING", False
        scheduler.on_trial_add(tune, t)
    a.status = b.status = "RUNNING"
    assert scheduler.on_trial_result(tune, a, {"epoch": 2, "val_top1": 0.5}) == "PAUSE"
    return scheduler, tune, stopped, a, b


def test_hyperband_stops_a_paused_trial_when_a_completion_finishes_its_bracket(tmp_path):
    """A pauses at max_t while B runs; B's last report arriving as a completion finishes the
    bracket without processing it. A must be stopped, not left PAUSED (the study would wait
    forever with nothing running: seen in CI)."""
    scheduler, tune, stopped, a, b = _hyperband_pair(tmp_path)
    a.status = "PAUSED"
    scheduler.on_trial_complete(tune, b, {"epoch": 2, "val_top1": 0.4})
    assert scheduler.choose_trial_to_run(tune) is None
    assert stopped == [a]


def test_hyperband_stops_a_trial_whose_pause_was_in_flight_when_its_bracket_finished(tmp_path):
    scheduler, tune, stopped, a, b = _hyperband_pair(tmp_path)
    assert scheduler.on_trial_result(tune, b, {"epoch": 2, "val_top1": 0.4}) == "STOP"
    assert stopped == []  # A was still RUNNING (saving its pause checkpoint): Ray skipped it
    a.status = "PAUSED"
    assert scheduler.choose_trial_to_run(tune) is None
    assert stopped == [a]


def test_hyperband_halves_a_bracket_of_four_points(tmp_path):
    """max_t 4, reduction_factor 2: the first bracket is HyperBand's most aggressive (4 points at
    epoch 1, 2 at 2, 1 at 4). Ray's own starts with the bracket that never halves and stopped
    none of the 4 points."""
    options = {"type": "hyperband", "max_t": 4, "reduction_factor": 2}
    spec = load_study(write_study(tmp_path, "hb4", scheduler=options), [])
    scheduler = scheduler_for(spec, "val_top1", "max", 4)
    stopped = []

    def stop(t):
        t.status = "TERMINATED"
        stopped.append(t.trial_id)
        scheduler.on_trial_remove(tune, t)

    tune = SimpleNamespace(get_live_trials=lambda: [], stop_trial=stop)
    trials = [_trial(name, "attention") for name in "abcd"]
    for t, score in zip(trials, (0.4, 0.3, 0.2, 0.1), strict=True):
        t.status, t.is_saving, t.score = "RUNNING", False, score
        scheduler.on_trial_add(tune, t)
    decisions = []
    for t in trials:
        decisions.append(scheduler.on_trial_result(tune, t, {"epoch": 1, "val_top1": t.score}))
        t.status = "PAUSED" if decisions[-1] == "PAUSE" else t.status
    assert decisions == ["PAUSE", "PAUSE", "PAUSE", "STOP"] and stopped == ["c"]
    a, b = trials[:2]
    assert scheduler.choose_trial_to_run(tune) in (a, b)
    a.status = b.status = "RUNNING"
    assert scheduler.on_trial_result(tune, a, {"epoch": 2, "val_top1": 0.4}) == "PAUSE"
    a.status = "PAUSED"
    assert scheduler.on_trial_result(tune, b, {"epoch": 2, "val_top1": 0.3}) == "STOP"
    assert scheduler.choose_trial_to_run(tune) is a  # the last of the four goes on to max_t
    a.status = "RUNNING"
    assert scheduler.on_trial_result(tune, a, {"epoch": 3, "val_top1": 0.4}) == "CONTINUE"


def test_early_stopping_needs_one_objective(tmp_path):
    study = write_study(
        tmp_path,
        "two",
        space=TWO_ARMS,
        scheduler={"type": "hyperband"},
        objectives=[{"metric": "val_top1", "mode": "max"}, {"metric": "params", "mode": "min"}],
    )
    with pytest.raises(SpecError, match="hyperband stops trials on one metric"):
        load_study(study)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_small_study_runs_under_hyperband(tmp_path):
    """On real Ray once, with the scheduler that pauses trials (a bracket finishing while one is
    paused hung a study in CI); median stopping's rule per arm is the unit test's above."""
    kind = "hyperband"
    options = {"type": kind, "max_t": 2, "reduction_factor": 2}
    study = write_study(
        tmp_path,
        f"sched-{kind}",
        space={"model.width": {"choice": [8, 16]}, "train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
        search={"algorithm": "random", "num_samples": 4, "max_concurrent_trials": 2},
        scheduler=options,
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "r"),
        "--num-cpus", "2", "--quiet", "--set", "trial.data.num_train=128", "--set", "trial.data.num_val=64",
        cwd=tmp_path,
    )  # fmt: skip
    runs = child_runs(uri, f"sched-{kind}")
    assert len(runs) == 4
    assert all(r.data.tags["vitscale.status"] == "FINISHED" for r in runs)
    assert all("val_loss" in r.data.metrics for r in runs)  # each trained an epoch (epoch is the step)
    # the first bracket halves at epoch 1 (2 points, one kept), under Ray's own nothing stopped
    assert any(r.data.tags[layout.STOPPED_EARLY] == "true" for r in runs)
