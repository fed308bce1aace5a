"""A configuration's MLflow params and a record's metrics, in the layout `vitscale analyze` reads.

Written by both paths — `vitscale bench --tracking-uri` and benchmark studies on Ray — so a
store holds the same keys whichever wrote it (see vitscale.tracking.layout). The model is logged
as training trials log theirs (`model.*`, every section included), so the analysis reads one set
of names. Every param but model.mixer/regime/image_size/attention.backend, the seed and the
variant (`bench.dtype`, `bench.batch_size`, `bench.compile`: a sweep may list several of each) is
constant within a sweep: the analysis splits curves by any other param that varies, so variants
become separate curves. A listed variant key is logged per run, as the one value that run measured
(never the list: that is the parent's spec.yaml), as a grid study logs each trial's point.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from vitscale.bench.records import flat_model, series
from vitscale.tracking import layout
from vitscale.tracking.layout import BENCH_METRICS

# Beside BENCH_METRICS: each mode's peak (peak_memory_mb is the sweep's mode's), the idle peak and
# whole-process peak (CPU), CPU time, the repeats' spread (what a ratio must beat: bench.margin)
# and CPU time over wall × threads (bench.contention).
EXTRA_METRICS = (
    "inference_memory_mb",
    "train_memory_mb",
    "baseline_memory_mb",
    "process_peak_rss_mb",
    "cpu_ms",
    "latency_spread",
    "cpu_wall_ratio",
    "compile_seconds",
)


def bench_params(config, point: Mapping[str, Any], seed: int | None = None) -> dict[str, Any]:
    """MLflow params of one configuration: the model as every trial logs it (`model.*`, from the
    config and the registered settings), plus what only a benchmark has (`bench.*`), the variant's
    dtype, batch size and compile flag among them."""
    variant = config.variant(point)
    return {
        **flat_model(config.model_for(point)),
        "bench.batch_size": variant.batch_size,
        "bench.mode": config.mode,
        "bench.dtype": variant.dtype,
        "bench.device": config.device,
        "bench.compile": variant.compile,
        "bench.compile_mode": config.compile_mode,
        "bench.warmup": config.warmup,
        "bench.repeats": config.repeats,
        "bench.threads": config.threads,
        "bench.seed": config.seed if seed is None else seed,
    }


def config_key(params: Mapping[str, Any]) -> str:
    """Hash of the params without the seed: replicates of one configuration share it."""
    blob = json.dumps({k: v for k, v in params.items() if k != "bench.seed"}, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def run_name(point: Mapping[str, Any], seed: int, config=None) -> str:
    """`ssog · ode · r512 · s0`: what the MLflow UI lists, spelled as training trials are; with the
    config, the variant keys it lists several values of follow (`ssog · ode · r512 · bfloat16 ·
    batch_size=512 · compile=True · s0`)."""
    values = {
        "model.mixer": series(point),
        "model.regime": point["regime"],
        "data.resolution": point["resolution"],
    }
    if config is not None:
        variant = config.variant(point)._asdict()
        values.update({f"bench.{key}": variant[key] for key in config.varying()})
    return layout.run_name(values, seed)


def bench_metrics(record: Mapping[str, Any]) -> dict[str, float]:
    """BENCH_METRICS and EXTRA_METRICS that the record has; missing and non-finite ones left out."""
    out = {}
    for key in (*BENCH_METRICS, *EXTRA_METRICS):
        value = record.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            out[key] = float(value)
    return out
