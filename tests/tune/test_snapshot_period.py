"""Tune's experiment snapshot period grows with the planned trials (bounded; 2 s for PBT/PB2), reaches Tune through
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


def test_population_studies_snapshot_every_2_s_and_the_driver_env_leaves_the_period_to_the_study(
    monkeypatch,
):
    from vitscale.tune import cluster

    assert snapshot_period.period_s(1000, population=True) == snapshot_period.POPULATION_S == 2.0
    assert snapshot_period.ENV not in cluster.DRIVER_ENV  # a fixed value there read as the user's
    monkeypatch.delenv(snapshot_period.ENV, raising=False)
    snapshot_period.apply(1000, population=True)
    assert os.environ[snapshot_period.ENV] == "2"
