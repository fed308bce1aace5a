"""BOHB (`search.algorithm: bohb`): TPE whose points Optuna's HyperbandPruner stops, one pruner
per arm; its validation; one small real study."""

from __future__ import annotations

import json
from types import SimpleNamespace

import optuna
import pytest
from study_helpers import child_runs, vitscale, write_study

from vitscale.cli import main
from vitscale.study import load_study
from vitscale.tracking import layout
from vitscale.tune.arm_asha import ArmScheduler, scheduler_for

SPACE = {"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}}


class _Trial(SimpleNamespace):
    __hash__ = object.__hash__


def _cli(capsys, *argv: str) -> tuple[int, str]:
    with pytest.raises(SystemExit) as info:
        main([*argv])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return info.value.code or 0, out + err


def test_bohb_is_accepted_in_an_ordinary_study_and_reads_the_hyperband_section(tmp_path, capsys):
    study = write_study(tmp_path, "bohb", space=SPACE, search={"algorithm": "bohb"})
    code, out = _cli(capsys, "study", "validate", str(study))
    assert code == 0, out
    spec = load_study(study, ["scheduler.reduction_factor=2"])
    assert spec.scheduler.type == "hyperband" and spec.scheduler.max_t == spec.trial.train.epochs
    code, out = _cli(capsys, "study", "schema")
    algorithm = json.loads(out)["$defs"]["SearchConfig"]["properties"]["algorithm"]
    assert "bohb" in algorithm["enum"]


@pytest.mark.parametrize(
    ("sections", "overrides", "line"),
    [
        ({"scheduler": {"type": "fifo"}}, [], "scheduler.type: bohb stops its points with its own HyperBand"),
        ({"scheduler": {"type": "asha"}}, [], "scheduler.type: bohb stops its points with its own HyperBand"),
        ({}, ["scheduler.reduction_factor=2.5"], "scheduler.reduction_factor: 2.5: bohb's HyperBand"),
        (
            {},
            ["trial.train.epochs=null", "trial.train.train_flops=1e9"],
            "search.algorithm: bohb's rungs count",
        ),
    ],
)
def test_bohb_is_refused_where_it_cannot_stop_points(tmp_path, capsys, sections, overrides, line):
    study = write_study(tmp_path, "bad", space=SPACE, search={"algorithm": "bohb"}, **sections)
    sets = [arg for o in overrides for arg in ("--set", o)]
    code, out = _cli(capsys, "study", "validate", str(study), *sets)
    errors = [x for x in out.splitlines() if x.startswith("error:")]
    assert code == 2 and len(errors) == 1 and line in errors[0], out


def test_bohb_prunes_within_an_arm_only(tmp_path):
    """Eight attention points, each worse than the one before, at epochs 1-4: the pruner stops
    some of them at their brackets' rungs. An ssog point worse than all of them, alone in its
    arm, runs on: its arm has brackets of its own."""
    space = {**SPACE, "model.mixer": {"choice": ["attention", "ssog"]}}
    spec = load_study(
        write_study(tmp_path, "bohb", space=space, search={"algorithm": "bohb"}),
        ["trial.train.epochs=4", "scheduler.reduction_factor=2"],
    )
    scheduler = scheduler_for(spec, "val_top1", "max", 4)
    assert isinstance(scheduler, ArmScheduler) and scheduler.kind == "bohb"
    tune = SimpleNamespace(get_live_trials=lambda: [])
    stopped = {}
    trials = [
        _Trial(
            trial_id=f"a{i}", config={"point": {"model.mixer": "attention"}, "seed": 0}, score=0.9 - 0.1 * i
        )
        for i in range(8)
    ]
    lone = _Trial(trial_id="s0", config={"point": {"model.mixer": "ssog"}, "seed": 0}, score=0.0)
    for trial in [*trials, lone]:
        scheduler.on_trial_add(tune, trial)
        for epoch in range(1, 5):
            decision = scheduler.on_trial_result(tune, trial, {"epoch": epoch, "val_top1": trial.score})
            if decision == "STOP":
                stopped[trial.trial_id] = epoch
                break
        scheduler.on_trial_complete(tune, trial, {"epoch": epoch, "val_top1": trial.score})
    assert stopped and "a0" not in stopped and "s0" not in stopped, stopped
    assert all(epoch < 4 for epoch in stopped.values()), stopped  # the last epoch is not judged
    assert scheduler.arms == [
        "model.mixer=attention,model.regime=discrete",
        "model.mixer=ssog,model.regime=discrete",
    ]


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_small_bohb_study_stops_points_early_and_completes(tmp_path):
    """Points 0 and 1 share the pruner's first bracket (rungs at epochs 1 and 2 of 4); point 1,
    at a learning rate that learns nothing, is stopped at a rung. One trial at a time: the order
    in which they reach a rung is the points' order."""
    start = [{"train.lr": 1.0e-2, "model.width": 16}, {"train.lr": 1.0e-5, "model.width": 8}]
    study = write_study(
        tmp_path,
        "bohb-run",
        space={"train.lr": {"loguniform": [1.0e-5, 3.0e-2]}, "model.width": {"choice": [8, 16]}},
        search={"algorithm": "bohb", "num_samples": 4, "max_concurrent_trials": 1, "start_points": start},
        scheduler={"reduction_factor": 2},
    )
    uri, storage = f"sqlite:///{tmp_path / 'mlflow.db'}", tmp_path / "r"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(storage), "--num-cpus", "2",
        "--quiet", "--set", "trial.train.epochs=4", "--set", "trial.data.num_train=256",
        "--set", "trial.data.num_val=64", cwd=tmp_path, timeout=840,
    )  # fmt: skip
    runs = child_runs(uri, "bohb-run")
    assert len(runs) == 4 and all(r.data.tags["vitscale.status"] == "FINISHED" for r in runs)
    early = [r for r in runs if r.data.tags[layout.STOPPED_EARLY] == "true"]
    assert early and len(early) < len(runs), [r.data.tags[layout.STOPPED_EARLY] for r in runs]
    [db] = storage.glob("bohb-run/*/optuna.db")
    trials = optuna.load_study(study_name="bohb-run", storage=f"sqlite:///{db}").trials
    states = [t.state.name for t in trials]
    assert states.count("PRUNED") == len(early) and "COMPLETE" in states, states  # TPE saw how far each got
    assert trials[1].state.name == "PRUNED" and trials[0].state.name == "COMPLETE", states
