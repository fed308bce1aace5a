"""Benchmark studies on Ray Tune: one trial measures one configuration.

The tuner's grid gives each trial `{"point": {mixer, regime, resolution, attention_backend},
"seed": s}`. The trial measures it as `vitscale bench` does (a subprocess per configuration on
CPU, in-process on a GPU; on CPU by default paired, timed round-robin beside its cell's attention
configurations: `bench.paired`) and reports once, at epoch 1. An out-of-memory or
failed configuration is reported with `failure_reason` rather than raised: retrying would fail
the same way, and the driver's MLflow callback records it as a FAILED child run with that
reason (FAILURE_REASON `out_of_memory`), which the analysis shows as `oom`.
"""

from __future__ import annotations

import math
from typing import Any

from vitscale.bench.fields import EXTRA_METRICS, bench_metrics, bench_params, config_key, run_name
from vitscale.bench.isolate import run_isolated
from vitscale.bench.measure import measure_configuration
from vitscale.bench.paired import is_paired, is_paired_metric, references
from vitscale.bench.runner import measure_paired
from vitscale.device import resolve_device
from vitscale.tracking.layout import BENCH_METRICS
from vitscale.tracking.tune_callback import (
    RESULT_FAILURE_MESSAGE,
    RESULT_FAILURE_REASON,
    RESULT_NODE_ID,
    RESULT_PLANNED_EPOCHS,
    TrialDescription,
)


def _point_and_seed(config: dict[str, Any], spec) -> tuple[dict[str, Any], int]:
    """Accept the tuner's {"point", "seed"} and a bare configuration dict alike."""
    point = config.get("point", config)
    seed = config.get("seed", spec.benchmark.seed)
    return dict(point), int(seed)


def trial_benchmark(spec, seed: int):
    """The study's BenchmarkConfig with this trial's seed and its CPU share as threads."""
    threads = spec.benchmark.threads or max(1, int(spec.resources.cpu))
    return spec.benchmark.model_copy(update={"seed": seed, "threads": threads})


def describe_bench_trial(config: dict[str, Any], spec) -> TrialDescription:
    """Run name, params and replicate group of a trial, for its MLflow child run. Like a training
    trial's, the params hold the active mixer's and regime's settings only (an attention run logs
    no `model.axial.*`); the replicate key hashes them all, as it always has."""
    point, seed = _point_and_seed(config, spec)
    bench = trial_benchmark(spec, seed)
    params = bench_params(bench, point, seed)
    unused = tuple(f"model.{name}." for name in bench.model_for(point).unused_sections())
    logged = {k: v for k, v in params.items() if not k.startswith(unused)}
    return TrialDescription(
        run_name=run_name(point, seed, bench), params=logged, config_key=config_key(params)
    )


def measure_trial(config: dict[str, Any], spec) -> dict[str, Any]:
    """The record of the trial's configuration (CPU: in its own subprocess, peak above its idle
    peak); paired (bench.paired): timed round-robin beside its cell's attention configurations."""
    point, seed = _point_and_seed(config, spec)
    bench = trial_benchmark(spec, seed)
    device = str(resolve_device(bench.device))
    if is_paired(bench, device):
        return measure_paired(bench, point, references(bench, point), device)
    if device == "cpu":
        return run_isolated(bench, point, device)
    return measure_configuration(bench, point, device=device)


def trial_result(record: dict[str, Any], node_id: str) -> dict[str, Any]:
    """What the trial reports to Tune: metrics, or NaN metrics and the failure reason."""
    result: dict[str, Any] = {
        "epoch": 1,
        RESULT_NODE_ID: node_id,
        RESULT_PLANNED_EPOCHS: 1,
        RESULT_FAILURE_REASON: "",
    }
    if record["status"] == "ok":
        result.update(bench_metrics(record))
        result.update({k: float(v) for k, v in record.items() if is_paired_metric(k)})
    else:
        result.update({k: math.nan for k in (*BENCH_METRICS, *EXTRA_METRICS)})
        result[RESULT_FAILURE_REASON] = record["status"]  # out_of_memory | error
        result[RESULT_FAILURE_MESSAGE] = record.get("error") or record["status"]
    return result


def bench_trial(config: dict[str, Any], spec) -> None:
    """Tune's trial function for `kind: benchmark` studies."""
    import ray
    from ray import tune

    record = measure_trial(config, spec)
    tune.report(trial_result(record, ray.get_runtime_context().get_node_id()))
