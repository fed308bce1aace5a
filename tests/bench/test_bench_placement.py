"""Trustworthy CPU timings: a CPU benchmark trial reserves its node, each timing records its CPU time
over wall × threads and is flagged when that is far from 1, and the repeats' spread is kept."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from vitscale.bench import measure
from vitscale.bench.contention import contention_note, cpu_wall_ratio, is_contended
from vitscale.bench.placement import reserves_node, trial_resources
from vitscale.bench.timing import relative_spread, time_iterations
from vitscale.study import load_study

STUDIES = Path(__file__).resolve().parents[2] / "studies"
SMOKE = STUDIES / "throughput_resolution_smoke.yaml"


def test_a_cpu_benchmark_trial_reserves_the_whole_node():
    spec = load_study(SMOKE)
    assert spec.resources.cpu == 1 and reserves_node(spec)
    assert trial_resources(spec, cpus_per_node=2) == {"cpu": 2, "gpu": 0}
    assert trial_resources(spec, cpus_per_node=16)["cpu"] == 16
    # not connected to Ray: this machine's CPUs
    assert trial_resources(spec)["cpu"] == max(1, os.cpu_count() or 1)
    # the study can opt out (faster, contended)
    shared = load_study(SMOKE, ["benchmark.reserve_node=false"])
    assert not reserves_node(shared) and trial_resources(shared, cpus_per_node=2) == {"cpu": 1, "gpu": 0}


def test_gpu_benchmarks_and_training_studies_keep_what_they_ask():
    gpu = load_study(STUDIES / "throughput_resolution.yaml")
    assert not reserves_node(gpu) and trial_resources(gpu, cpus_per_node=64) == {"cpu": 4, "gpu": 1}
    forced = load_study(STUDIES / "throughput_resolution.yaml", ["benchmark.reserve_node=true"])
    assert trial_resources(forced, cpus_per_node=64) == {"cpu": 64, "gpu": 1}
    train = load_study(STUDIES / "quickstart.yaml")
    assert trial_resources(train, cpus_per_node=64) == {
        "cpu": train.resources.cpu,
        "gpu": train.resources.gpu,
    }


def test_the_trial_times_with_the_threads_it_asked_for_not_the_node():
    from vitscale.bench.trial import trial_benchmark

    assert trial_benchmark(load_study(SMOKE), seed=0).threads == 1


def test_waiting_shows_as_a_low_cpu_wall_ratio():
    cpu: list[float] = []
    wall = time_iterations(
        lambda: time.sleep(0.02), warmup=0, repeats=3, synchronize=lambda: None, cpu_times=cpu
    )
    ratio = cpu_wall_ratio(cpu, wall, threads=1)
    assert ratio is not None and ratio < 0.5 and is_contended(ratio)
    assert cpu_wall_ratio([], wall, 1) is None and not is_contended(None)
    assert not is_contended(0.97) and is_contended(2.1)  # more threads ran than it was given
    note = contention_note({"cpu_wall_ratio": 0.16, "threads": 1})
    assert note == "cpu/wall 0.16 of 1 thread"
    assert contention_note({"cpu_wall_ratio": 0.95, "threads": 2}) is None


def test_a_cpu_timing_records_its_ratio_and_its_repeat_spread(tiny_config):
    config = tiny_config(mixers=["ssog"], warmup=1, repeats=5)
    record = measure.measure_configuration(config, config.configurations()[0])
    assert record["status"] == "ok", record["error"]
    assert record["cpu_wall_ratio"] > 0 and record["threads"] == 1
    assert record["latency_spread"] == pytest.approx(
        relative_spread([t / 1e3 for t in record["latencies_ms"]])
    )
    assert record["cpu_spread"] is not None


def test_the_repeat_spread_is_the_interquartile_range_over_the_median():
    assert relative_spread([1.0]) is None
    assert relative_spread([1.0, 1.0, 1.0]) == 0.0
    # inclusive quartiles of 1..5: 2 and 4, median 3
    assert relative_spread([5.0, 1.0, 3.0, 2.0, 4.0]) == pytest.approx(2.0 / 3.0)
