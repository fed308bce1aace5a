"""A sampler study's driver killed at any point around a trial's completion resumes to exactly its
plan. Tune and Optuna keep separate state: Optuna's RDB is written at once, Tune's experiment
snapshot (which holds the searcher) every few seconds, so a killed driver can leave Optuna ahead
of the snapshot: a point already told COMPLETE, an Optuna trial asked for a Tune trial the
snapshot never saw. Here the driver is Tune's loop as the resume sees it (restore the searcher
and trials from the last snapshot, re-run the trials the snapshot had RUNNING, suggest the rest),
killed at 10 points — before, during and after Optuna's `tell` — against a real Optuna RDB."""

from __future__ import annotations

import copy
import functools
import math

import optuna
import pytest
from ray.tune.search.optuna import OptunaSearch

from vitscale.tune.replicates import ReplicatedSearcher

POINTS, SEEDS, EPOCHS = 3, [0, 1], 2
PLANNED = POINTS * len(SEEDS)  # Tune trials; each takes 4 events: suggest, 2 results, complete


class Killed(Exception):
    """The driver died here."""


def _space(trial):
    return {"point": {"train.lr": trial.suggest_float("train.lr", 1e-4, 1e-1, log=True)}}


def _searcher(url: str) -> ReplicatedSearcher:
    inner = OptunaSearch(
        space=functools.partial(_space),
        metric="val_top1",
        mode="max",
        sampler=optuna.samplers.TPESampler(seed=0, n_startup_trials=1),
        study_name="kill-points",
        storage=optuna.storages.RDBStorage(url),
    )
    return ReplicatedSearcher(inner, SEEDS, ["val_top1"], ["max"])


def _val(config: dict, epoch: int) -> float:
    """A deterministic objective: a point's replicates differ by seed."""
    return round(-abs(math.log10(config["point"]["train.lr"]) + 2) + 0.01 * config["seed"] + 0.001 * epoch, 6)


class Driver:
    """Tune's loop, one trial at a time (max_concurrent_trials: 1), counting events."""

    def __init__(self, searcher, trials, kill_at=None, snapshot_at=(), tmp_path=None):
        self.searcher, self.trials = searcher, trials
        self.kill_at, self.snapshot_at, self.tmp_path = kill_at, set(snapshot_at), tmp_path
        self.events, self.snapshot = 0, None

    def event(self) -> None:
        self.events += 1
        if self.events in self.snapshot_at:  # Tune's periodic experiment snapshot
            path = self.tmp_path / f"searcher-{self.events}.pkl"
            self.searcher.save(str(path))
            self.snapshot = (path, copy.deepcopy(self.trials))
        if self.events == self.kill_at:
            raise Killed

    def run(self) -> None:
        while True:
            running = [t for t in self.trials if t["status"] == "RUNNING"]
            if running:
                trial = running[0]
            elif len(self.trials) < PLANNED:
                trial_id = f"trial-{len(self.trials)}"
                config = self.searcher.suggest(trial_id)
                trial = {"id": trial_id, "config": config, "status": "RUNNING"}
                self.trials.append(trial)
                self.event()
            else:
                return
            for epoch in range(1, EPOCHS + 1):  # restarted trials report again from the start
                result = {"val_top1": _val(trial["config"], epoch), "training_iteration": epoch}
                self.searcher.on_trial_result(trial["id"], result)
                self.event()
            self.searcher.on_trial_complete(trial["id"], result)
            trial["status"] = "TERMINATED"
            self.event()


CASES = {  # name: (snapshot events, kill event or None, kill inside the nth tell or None)
    "before the last replicate completes": ((6,), 7, None),
    "after the tell, snapshot before it": ((7,), 8, None),
    "after the tell, snapshot two trials old": ((4,), 8, None),
    "during the tell": ((7,), None, 1),
    "after the tell, snapshot after it": ((8,), 8, None),
    "after the next ask, snapshot before the tell": ((7,), 9, None),
    "after the next ask, snapshot after the tell": ((8,), 9, None),
    "mid-trial of the next point": ((2,), 10, None),
    "after the second point's tell": ((15,), 16, None),
    "during the second point's tell": ((12,), None, 2),
}


@pytest.mark.parametrize("case", CASES)
def test_a_driver_killed_here_resumes_to_exactly_the_plan(case, tmp_path, monkeypatch):
    snapshots, kill_at, tell_kill = CASES[case]
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    if tell_kill is not None:  # die inside the completion: runs noted, Optuna not yet told
        real, told = OptunaSearch.on_trial_complete, []

        def dying_tell(self, *args, **kwargs):
            told.append(1)
            if len(told) == tell_kill:
                raise Killed
            return real(self, *args, **kwargs)

        monkeypatch.setattr(OptunaSearch, "on_trial_complete", dying_tell)
    first = Driver(_searcher(url), [], kill_at, snapshots, tmp_path)
    with pytest.raises(Killed):
        first.run()
    monkeypatch.undo()
    assert first.snapshot is not None, "the kill came before the snapshot this case needs"

    path, trials = first.snapshot  # what `study resume` finds: the last snapshot, Optuna as it is
    resumed = _searcher(url)
    resumed.restore(str(path))
    Driver(resumed, trials).run()  # never raises: no UpdateFinishedTrialError

    assert [t["status"] for t in trials] == ["TERMINATED"] * PLANNED
    study = optuna.load_study(study_name="kill-points", storage=url)
    by_state = {}
    for trial in study.get_trials(deepcopy=False):
        by_state.setdefault(trial.state.name, []).append(trial)
    assert "RUNNING" not in by_state  # none left open in optuna-dashboard
    assert len(by_state["COMPLETE"]) == POINTS  # each planned point told once, none twice
    for told in by_state["COMPLETE"]:  # with the seed mean of its replicates
        replicates = [
            t["config"] for t in trials if t["config"]["point"]["train.lr"] == told.params["train.lr"]
        ]
        assert sorted(c["seed"] for c in replicates) == SEEDS
        assert told.value == pytest.approx(sum(_val(c, EPOCHS) for c in replicates) / len(SEEDS))
    # an Optuna trial asked by the dead driver for a Tune trial no snapshot saw: closed as FAIL
    assert all(t.user_attrs.get("abandoned") for t in by_state.get("FAIL", []))
