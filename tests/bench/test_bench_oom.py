"""Out of memory is a result, not a crash: the configuration is recorded `oom`, the sweep goes on."""

from __future__ import annotations

import sys

import pytest
import torch

from vitscale.bench import isolate, measure
from vitscale.bench.runner import run_benchmark


def _builder(counting_model, failing_backend: str, error: BaseException):
    def build(cfg):
        fail = cfg.mixer == "attention" and cfg.attention.backend == failing_backend
        return counting_model(cfg.num_classes, fail_with=error if fail else None)

    return build


def test_cuda_oom_in_one_configuration_is_recorded_and_the_sweep_goes_on(
    tiny_config, counting_model, monkeypatch
):
    error = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
    monkeypatch.setattr(measure, "build", _builder(counting_model, "math", error))
    config = tiny_config(resolutions=[16, 32])
    records = run_benchmark(config, progress=False, isolate=False)
    assert len(records) == len(config.configurations()) == 6
    by = {(r["resolution"], r["mixer"], r["attention_backend"]): r for r in records}
    for res in (16, 32):
        oom = by[(res, "attention", "math")]
        assert oom["status"] == "out_of_memory" and oom["error"].startswith(
            "OutOfMemoryError: CUDA out of memory"
        )
        assert oom["images_per_second"] is None and oom["latency_ms"] is None
        assert by[(res, "attention", "sdpa")]["status"] == by[(res, "ssog", None)]["status"] == "ok"


@pytest.mark.parametrize(
    ("error", "status"),
    [
        (MemoryError(), "out_of_memory"),
        (
            RuntimeError("[enforce fail at alloc_cpu.cpp:117] DefaultCPUAllocator: can't allocate memory"),
            "out_of_memory",
        ),
        (ValueError("something else"), "error"),
    ],
)
def test_cpu_allocation_failures_are_oom_and_other_errors_are_errors(
    tiny_config, counting_model, monkeypatch, error, status
):
    monkeypatch.setattr(measure, "build", _builder(counting_model, "sdpa", error))
    records = run_benchmark(tiny_config(), progress=False, isolate=False)
    assert [r["status"] for r in records] == [status, "ok", "ok"]


def test_a_worker_killed_by_the_oom_killer_is_an_oom_record(tiny_config, monkeypatch):
    config = tiny_config()
    point = config.configurations()[0]
    kill = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    monkeypatch.setattr(isolate, "WORKER", [sys.executable, "-c", kill])
    record = isolate.run_isolated(config, point)
    assert record["status"] == "out_of_memory" and "SIGKILL" in record["error"]
    assert record["mixer"] == "attention" and record["images_per_second"] is None

    monkeypatch.setattr(isolate, "WORKER", [sys.executable, "-c", "import sys; sys.exit('boom')"])
    record = isolate.run_isolated(config, point)
    assert record["status"] == "error" and "boom" in record["error"]
