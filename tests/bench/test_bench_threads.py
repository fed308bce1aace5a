"""A benchmark worker process starts with OMP_WAIT_POLICY=PASSIVE (unless the user set a policy)
and the config's threads: its record says what the worker ran with."""

from __future__ import annotations

from vitscale.bench import isolate


def test_bench_worker_runs_passive_with_the_configs_threads(tiny_config, monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    config = tiny_config(mixers=["attention"], warmup=0, repeats=1, threads=1)
    record = isolate.run_isolated(config, config.configurations()[0])
    assert record["status"] == "ok", record["error"]
    assert (record["omp_wait_policy"], record["threads"]) == ("PASSIVE", 1)


def test_a_policy_the_user_exported_reaches_the_bench_worker(tiny_config, monkeypatch):
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    config = tiny_config(mixers=["attention"], warmup=0, repeats=1, threads=2)
    record = isolate.run_isolated(config, config.configurations()[0])
    assert record["status"] == "ok", record["error"]
    assert (record["omp_wait_policy"], record["threads"]) == ("ACTIVE", 2)
