"""Tune's experiment snapshot period grows with the planned trials (bounded), reaches Tune through
the variable Ray 2.60 reads, and leaves a value the user set alone."""

from __future__ import annotations

import inspect
import os

from ray.tune.execution.tune_controller import TuneController

from vitscale.tune import snapshot_period


def test_the_period_grows_with_the_plan_within_bounds():
    periods = [snapshot_period.period_s(n) for n in (1, 10, 50, 100, 300, 1000, 10_000)]
    assert periods == sorted(periods)
    assert periods[0] == snapshot_period.MIN_S and periods[-1] == snapshot_period.MAX_S
    assert snapshot_period.period_s(300) == 60.0  # 300 trials: 7.95 MB a rewrite, once a minute


def test_apply_sets_what_tune_reads_and_the_users_value_wins(monkeypatch):
    assert f'"{snapshot_period.ENV}"' in inspect.getsource(TuneController.__init__)
    monkeypatch.delenv(snapshot_period.ENV, raising=False)
    snapshot_period.apply(300)
    assert os.environ[snapshot_period.ENV] == "60"
    snapshot_period.apply(1000)  # the next study's own value replaces ours
    assert os.environ[snapshot_period.ENV] == "200"
    monkeypatch.setenv(snapshot_period.ENV, "5")
    snapshot_period.apply(300)
    assert os.environ[snapshot_period.ENV] == "5"
