"""Benchmark studies: the smoke study validates, its trials describe themselves in the analysis'
layout, and it runs on the in-process Ray with every configuration in MLflow."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from vitscale.analysis.load.fields import FIELDS
from vitscale.bench import trial
from vitscale.models import MIXERS
from vitscale.study import grid_points, load_study

SMOKE = Path(__file__).resolve().parents[2] / "studies" / "throughput_resolution_smoke.yaml"


def test_the_smoke_study_is_a_small_cpu_variant_of_the_paper_sweep():
    spec = load_study(SMOKE)
    assert spec.kind == "benchmark" and spec.benchmark.device == "cpu"
    assert spec.resources.cpu == 1 and spec.resources.gpu == 0
    points = grid_points(spec)
    assert len(points) == 42 and {p["resolution"] for p in points} == {32, 64}
    assert sorted(spec.benchmark.mixers) == sorted(MIXERS) and spec.benchmark.attention_backends == [
        "sdpa",
        "math",
    ]


def test_trial_description_has_every_param_the_analysis_reads():
    spec = load_study(SMOKE)
    point = grid_points(spec)[1]
    desc = trial.describe_bench_trial({"point": point, "seed": 3}, spec)
    bench_fields = {src for sources in FIELDS.values() for src in sources if src.startswith("bench.")}
    assert bench_fields <= set(desc.params)
    assert desc.params["bench.seed"] == 3 and desc.params["bench.threads"] == 1
    assert desc.run_name == "attention/math · discrete · r32 · s3"
    other_seed = trial.describe_bench_trial({"point": point, "seed": 4}, spec)
    assert other_seed.config_key == desc.config_key  # replicates share the group
    # the active mixer's and regime's settings only, as a training trial logs them
    assert "model.attention.backend" in desc.params and desc.params["model.attention.backend"] == "math"
    assert not [k for k in desc.params if k.startswith(("model.axial.", "model.ssog.", "model.ode."))]


def test_trial_results_carry_metrics_or_the_failure():
    ok = {
        "status": "ok",
        "images_per_second": 5.0,
        "latency_ms": 400.0,
        "peak_memory_mb": 9.0,
        "flops_per_image": 1e6,
        "nfe": None,
        "tokens": 16,
        "params": 10,
        "baseline_memory_mb": 3.0,
    }
    result = trial.trial_result(ok, "node")
    assert result["epoch"] == 1 and result["failure_reason"] == "" and result["planned_epochs"] == 1
    assert result["images_per_second"] == 5.0 and "nfe" not in result
    failed = trial.trial_result({"status": "out_of_memory", "error": "OutOfMemoryError: x"}, "node")
    assert failed["failure_reason"] == "out_of_memory" and failed["failure_message"] == "OutOfMemoryError: x"
    assert math.isnan(failed["images_per_second"])


@pytest.mark.slow
def test_the_smoke_study_runs_on_in_process_ray(tmp_path):
    import os

    import ray
    from mlflow import MlflowClient

    from vitscale.tune.run import run_study

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    saved = dict(os.environ)
    try:
        # One resolution, discrete and ODE, attention (sdpa) and SSoG (4 of its 42 configurations;
        # every mixer x regime is measured in process by test_bench_precision): each
        # configuration measures its memory in a worker of its own (a clean peak RSS) and, paired,
        # times itself beside attention in another; each reserves the node, so they run one after
        # another. Fewer repeats and no training-step memory keep it to a minute or two on 2 cores.
        smoke = load_study(
            SMOKE,
            [
                "benchmark.mixers=[attention, ssog]",
                "benchmark.resolutions=[32]",
                "benchmark.regimes=[discrete, ode]",
                "benchmark.attention_backends=[sdpa]",
                "benchmark.warmup=2",
                "benchmark.repeats=20",
                "benchmark.train_memory=false",
            ],
        )
        run_study(smoke, tracking_uri=uri, storage=str(tmp_path / "results"), num_cpus=2, verbose=0)
    finally:
        # Leave no in-process Ray (nor the RAY_* variables ray.init sets) to the tests that follow.
        ray.shutdown()
        os.environ.clear()
        os.environ.update(saved)
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("throughput-resolution-smoke")
    [parent] = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'study'")
    assert parent.data.tags["vitscale.kind"] == "benchmark"
    children = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'trial'", max_results=100)
    assert len(children) == 4
    for child in children:
        assert child.data.tags["vitscale.status"] == "FINISHED", child.data.tags.get(
            "vitscale.failure_reason"
        )
        assert child.data.metrics["images_per_second"] > 0 and child.data.metrics["peak_memory_mb"] > 0
        assert child.data.params["bench.device"] == "cpu"
        assert ("nfe" in child.data.metrics) == (child.data.params["model.regime"] == "ode")
        assert child.data.metrics["cpu_wall_ratio"] > 0 and "latency_spread" in child.data.metrics
        # paired: every other mixer timed beside attention/sdpa in its own trial (bench.paired)
        paired = "paired_ratio_sdpa" in child.data.metrics
        assert paired == (child.data.params["model.mixer"] != "attention"), child.info.run_name
    # One timing at a time on the node: each trial started after the one before it reported (Tune's
    # `timestamp` is whole seconds, hence the second of slack). Two CPUs asked, threads stay 1.
    spans = []
    for result in (tmp_path / "results").rglob("result.json"):
        r = json.loads(result.read_text().splitlines()[0])
        spans.append((r["timestamp"] - r["time_total_s"], r["timestamp"]))
    spans.sort()
    assert len(spans) == 4
    assert all(later[0] >= earlier[1] - 1 for earlier, later in zip(spans, spans[1:], strict=False))
    assert {c.data.params["bench.threads"] for c in children} == {"1"}

    from vitscale.analysis.pipeline import analyze

    result = analyze("throughput-resolution-smoke", uri, tmp_path / "report", log_artifacts=False)
    assert result.counts()["used"] == 4
