"""CPU peak memory: one fresh subprocess per configuration, its own peak RSS above its idle peak."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from vitscale.bench import isolate, measure
from vitscale.bench.memory import own_peak_rss_mb
from vitscale.bench.worker import RECORD_PREFIX


def test_a_bigger_activation_gives_a_bigger_peak_above_the_idle_worker(tiny_config):
    # attention/math materialises batch x heads x 1025^2 floats: ~8 MB at batch 1, ~270 MB at 32
    config = tiny_config(
        mixers=["attention"], attention_backends=["math"], resolutions=[256], warmup=0, repeats=1
    )
    point = config.configurations()[0]
    small = isolate.run_isolated(config.model_copy(update={"batch_size": 1}), point)
    big = isolate.run_isolated(config.model_copy(update={"batch_size": 32}), point)
    assert small["status"] == big["status"] == "ok", (small["error"], big["error"])
    assert small["memory_kind"] == big["memory_kind"] == "rss_above_idle"
    assert big["peak_memory_mb"] > small["peak_memory_mb"] + 150
    for r in (small, big):  # the idle worker (python + torch, ~400 MB) is left out of the peak
        assert r["peak_memory_mb"] == pytest.approx(r["process_peak_rss_mb"] - r["baseline_memory_mb"])
        assert r["baseline_memory_mb"] > 50
    assert small["peak_memory_mb"] < small["baseline_memory_mb"]
    assert abs(small["baseline_memory_mb"] - big["baseline_memory_mb"]) < 50  # idle is idle


def test_the_worker_does_not_inherit_its_parents_peak(tiny_config):
    # ru_maxrss carries a forked parent's high-water mark across exec; VmHWM does not.
    ballast = np.ones(600 * 2**20 // 8)  # 600 MB in this (the parent) process
    parent = own_peak_rss_mb()
    config = tiny_config(mixers=["pooling"], warmup=0, repeats=1)
    record = isolate.run_isolated(config, config.configurations()[0])
    assert record["status"] == "ok", record["error"]
    assert record["baseline_memory_mb"] < parent - 400
    # a 16-px model of width 16 adds little; the FLOP counter's imports (~85 MB) are in the idle peak
    assert 0 < record["peak_memory_mb"] < 60
    del ballast


def test_own_peak_grows_with_an_allocation_in_a_fresh_process():
    code = (
        "import numpy as np; from vitscale.bench.memory import own_peak_rss_mb; a = own_peak_rss_mb(); "
        "b = np.ones(200 * 2**20 // 8); print(own_peak_rss_mb() - a)"
    )
    grew = float(
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    )
    assert 190 < grew < 260


def test_a_training_step_peaks_above_inference_and_both_are_measured_alone(tiny_config):
    # depth 2, math at 256 px, batch 8: the training step keeps each layer's 8 x 2 x 1025^2 attention
    # weights (~67 MB a layer) for backward, where inference frees one layer's before the next
    config = tiny_config(
        mixers=["attention"],
        attention_backends=["math"],
        resolutions=[256],
        model={"width": 16, "depth": 2, "heads": 2, "patch_size": 8, "num_classes": 5},
        batch_size=8,
        warmup=0,
        repeats=1,
    )
    point = config.configurations()[0]
    record = isolate.run_isolated(config, point, timed=False)
    assert record["status"] == "ok", record["error"]
    assert record["timing"] == "single" and len(record["latencies_ms"]) == 1  # the eager inference
    assert (
        record["inference_memory_mb"] > 60 and record["train_memory_mb"] > record["inference_memory_mb"] + 60
    )
    assert record["peak_memory_mb"] == record["inference_memory_mb"]  # an inference sweep's peak
    trained = isolate.run_isolated(config.model_copy(update={"mode": "train"}), point)
    assert trained["status"] == "ok", trained["error"]
    assert trained["peak_memory_mb"] == trained["train_memory_mb"] and trained["timing"] == "sequential"
    # the same two iterations in another process: the same peaks, to a few MB of allocator noise
    assert trained["train_memory_mb"] == pytest.approx(record["train_memory_mb"], abs=25)
    assert trained["inference_memory_mb"] == pytest.approx(record["inference_memory_mb"], abs=25)


def test_memory_is_eager_so_only_the_timed_run_compiles(tiny_config, counting_model, monkeypatch):
    compiled, models = [], []

    def build(cfg):
        models.append(counting_model(cfg.num_classes))
        return models[-1]

    monkeypatch.setattr(torch, "compile", lambda model, **options: compiled.append(model) or model)
    config = tiny_config(compile=True, warmup=1, repeats=2)
    point = config.configurations()[0]
    untimed = measure.measure_configuration(config, point, process_rss=True, timed=False, build_model=build)
    assert untimed["status"] == "ok", untimed["error"]
    assert compiled == [] and len(models) == 1 and models[0].calls == 3  # FLOP count, inference, train
    assert untimed["inference_memory_mb"] is not None and untimed["train_memory_mb"] is not None
    models.clear()
    timed = measure.measure_configuration(config, point, process_rss=True, build_model=build)
    assert timed["status"] == "ok", timed["error"]
    # the memory phase's model, then a freshly seeded one (the training step moved the first): compiled once
    assert len(models) == 2 and compiled == [models[1]] and models[1].calls == 1 + 2
    torch.manual_seed(config.seed)
    assert torch.equal(models[1].head.weight, counting_model(config.model.num_classes).head.weight)
    assert not torch.equal(models[0].head.weight, models[1].head.weight)


@pytest.mark.parametrize("timed", [False, True])
def test_a_worker_killed_in_its_training_step_keeps_its_inference_memory(tiny_config, monkeypatch, timed):
    # what measure_memory hands back before the step: finished (ok) untimed, not yet timed else
    partial = {
        "status": "error" if timed else "ok",
        "inference_memory_mb": 12.0,
        "train_memory_mb": None,
        "error": "train-mode memory: x",
    }
    code = (
        f"import json, os, signal; print({RECORD_PREFIX!r} + json.dumps({partial!r}), flush=True); "
        "os.kill(os.getpid(), signal.SIGKILL)"
    )
    monkeypatch.setattr(isolate, "WORKER", [sys.executable, "-c", code])
    config = tiny_config()
    record = isolate.run_isolated(config, config.configurations()[0], timed=timed)
    assert record["status"] == ("out_of_memory" if timed else "ok") and record["inference_memory_mb"] == 12.0
    assert record["error"].startswith("train-mode memory: x (out_of_memory: worker killed by SIGKILL")
