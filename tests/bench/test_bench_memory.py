"""CPU peak memory: one fresh subprocess per configuration, its own peak RSS above its idle peak."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from vitscale.bench import isolate
from vitscale.bench.memory import own_peak_rss_mb


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
