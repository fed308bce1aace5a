"""In-process Ray whose node misses Ray's fixed 30 s startup wait (a machine at load 70): started
again once, then one line, never Ray's traceback. Ray's failure is faked: an overloaded machine
cannot be made on demand."""

from __future__ import annotations

import pytest
import ray

from vitscale.errors import UserError
from vitscale.tune import cluster


def _init_failing(times: int, calls: list):
    def init(*args, **kwargs):
        calls.append(args)
        if len(calls) <= times:
            raise Exception(cluster.STARTUP_TIMEOUT + ". This could happen because ...")
        return "context"

    return init


def test_a_startup_timeout_is_retried_once_then_said_in_one_line(monkeypatch, capsys):
    calls: list = []
    monkeypatch.setattr(ray, "init", _init_failing(1, calls))
    monkeypatch.setattr(ray, "shutdown", lambda: None)
    assert cluster._start_local(1, 0, {}) == "context"
    assert len(calls) == 2 and "starting it again" in capsys.readouterr().out

    calls.clear()
    monkeypatch.setattr(ray, "init", _init_failing(2, calls))
    with pytest.raises(UserError, match=r"did not start: .* 2 times \(load average [\d, ]+\); retry"):
        cluster._start_local(1, 0, {})


def test_other_start_failures_are_not_taken_for_it(monkeypatch):
    def init(*args, **kwargs):
        raise ValueError("num_cpus must be positive")

    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(ValueError, match="num_cpus"):
        cluster._start_local(1, 0, {})
