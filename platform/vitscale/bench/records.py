"""One benchmark record per measured configuration: its fields, Arrow schema and Parquet file.

A record is a flat dict, so `--json`, Parquet, MLflow and the table all read the same thing: the
benchmark's own fields (SCHEMA) and the measured model as `model.*` columns (`model.width`,
`model.ssog.num_gaussians`, ...), one per ModelConfig leaf and registered settings field.
Missing values are None (JSON null, Parquet null): an `out_of_memory` record has no throughput, a
non-ODE model no NFE.

Memory: every configuration's peak in both modes, `inference_memory_mb` (one eager forward in
eval + inference_mode) and `train_memory_mb` (one eager forward + backward + AdamW step: weights,
activations kept for backward, gradients and optimizer state), each read alone (see
bench.measure.measure_memory; never compiled); `peak_memory_mb` is the sweep's `mode`'s of the two.
All are `memory_kind`:
- `cuda_max_allocated`: torch.cuda.max_memory_allocated over the iteration;
  `baseline_memory_mb` is what was allocated before it (weights + inputs).
- `rss_above_idle` (CPU): what the configuration added to the isolated subprocess that measured
  it alone — its peak resident set (VmHWM) over the iteration, minus its peak before the model was
  built, `baseline_memory_mb` (Python, torch, vitscale and the FLOP counter's imports loaded:
  ~370 MB that every configuration pays alike and that made every ratio read ~1.00×);
  `process_peak_rss_mb` is the whole process's peak in the sweep's mode.
  Records written before this field existed have memory_kind `process_peak_rss`: the whole process.
  Records written before the two modes' fields have `peak_memory_mb` only, over warmup and timed
  iterations.

Variant: `dtype`, `batch_size` and `compile` are the configuration's own (a sweep may list several
of each and time them side by side, see BenchmarkConfig.variants); `compile_seconds` is a compiled
configuration's first call, compilation included (null when eager or measured before it existed).

Timing: `latency_ms` is the median of `latencies_ms`, `latency_spread` their interquartile range
over that median (what a ratio must beat, see bench.margin); on CPU `cpu_ms` / `cpu_spread` the
same for process CPU time, and `cpu_wall_ratio` the timed region's CPU time ÷ (wall time × threads),
~1 unless the timing shared its cores (bench.contention).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vitscale.errors import OUT_OF_MEMORY
from vitscale.models.config import ModelConfig
from vitscale.validation import unwrap_optional

STATUSES = ("ok", OUT_OF_MEMORY, "error")
BENCHMARK_META = b"vitscale.benchmark"  # benchmark.parquet's schema metadata key: the sweep's config

SCHEMA = pa.schema(
    [
        ("mixer", pa.string()),
        ("regime", pa.string()),
        ("resolution", pa.int64()),
        ("attention_backend", pa.string()),  # null for mixers other than attention
        ("tokens", pa.int64()),  # grid tokens, (resolution / patch_size)^2
        ("batch_size", pa.int64()),
        ("mode", pa.string()),  # inference | train
        ("dtype", pa.string()),  # float32 | bfloat16 (autocast)
        ("device", pa.string()),  # cpu | cuda (resolved, never auto)
        ("compile", pa.bool_()),
        ("compile_mode", pa.string()),  # torch.compile mode (when compile)
        ("images_per_second", pa.float64()),  # batch_size / median latency
        ("latency_ms", pa.float64()),  # median time of one batch
        ("latency_spread", pa.float64()),  # interquartile range of the repeats / their median
        ("cpu_ms", pa.float64()),  # CPU runs: median process CPU time of one batch (see timing)
        ("cpu_spread", pa.float64()),  # the same spread for the CPU times
        ("cpu_wall_ratio", pa.float64()),  # CPU time / (wall x threads): ~1 unless contended
        ("peak_memory_mb", pa.float64()),  # CUDA: max allocated; CPU: peak RSS above the idle worker
        ("inference_memory_mb", pa.float64()),  # the same for one eager inference iteration
        ("train_memory_mb", pa.float64()),  # ... and one eager forward + backward + AdamW step
        ("baseline_memory_mb", pa.float64()),  # CUDA: allocated before iterating; CPU: the idle peak
        ("process_peak_rss_mb", pa.float64()),  # CPU: the worker's whole peak RSS
        ("memory_kind", pa.string()),  # cuda_max_allocated | rss_above_idle
        ("flops_per_image", pa.float64()),  # forward FLOPs (matmul family) of one image
        ("params", pa.int64()),
        ("nfe", pa.int64()),  # ODE: vector-field evaluations per forward; null otherwise
        ("status", pa.string()),  # ok | out_of_memory | error
        ("error", pa.string()),
        ("seed", pa.int64()),
        ("warmup", pa.int64()),
        ("repeats", pa.int64()),
        ("threads", pa.int64()),  # CPU intra-op threads used
        ("omp_wait_policy", pa.string()),  # OMP_WAIT_POLICY it ran with (PASSIVE unless the user set one)
        ("latencies_ms", pa.list_(pa.float64())),  # every timed iteration, in order
        ("timing", pa.string()),  # sequential | interleaved (round-robin with its cell, see measure)
        ("compile_seconds", pa.float64()),  # compiled: wall s of the first call (compiling + one iteration)
    ]
)
ARROW_TYPES = {bool: pa.bool_(), int: pa.int64(), float: pa.float64(), str: pa.string()}


def model_columns() -> dict[str, pa.DataType]:
    """`model.<path>` -> Arrow type for every leaf of ModelConfig and of every registered settings
    section: a record carries the model it measured, as trials log it to MLflow."""
    return {
        f"model.{path}": ARROW_TYPES.get(unwrap_optional(info.annotation), pa.string())
        for path, info in ModelConfig.leaves()
    }


def schema() -> pa.Schema:
    """SCHEMA plus the model columns of the mixers and regimes registered now."""
    return pa.schema([*SCHEMA, *model_columns().items()])


def fields() -> tuple[str, ...]:
    return tuple(schema().names)


FIELDS = tuple(SCHEMA.names)  # the benchmark's own columns; `fields()` adds the model's


def blank_record(config, point: Mapping[str, Any], device: str) -> dict[str, Any]:
    """The record of `point` (mixer, regime, resolution, attention_backend and its variant: dtype,
    batch_size, compile) before measuring."""
    model, variant = config.model_for(point), config.variant(point)
    record: dict[str, Any] = dict.fromkeys(fields())
    record.update(flat_model(model))
    record.update(
        mixer=point["mixer"],
        regime=point["regime"],
        resolution=int(point["resolution"]),
        attention_backend=point.get("attention_backend") if point["mixer"] == "attention" else None,
        tokens=model.grid[0] * model.grid[1],
        batch_size=variant.batch_size,
        mode=config.mode,
        dtype=variant.dtype,
        device=device,
        compile=variant.compile,
        compile_mode=config.compile_mode if variant.compile else None,
        seed=config.seed,
        warmup=config.warmup,
        repeats=config.repeats,
        threads=config.threads,
        status="error",
        latencies_ms=None,
    )
    return record


def flat_model(model) -> dict[str, Any]:
    """A ModelConfig as `model.<dotted path>` values (the MLflow params of a trial's model)."""
    out: dict[str, Any] = {}

    def walk(data: dict[str, Any], prefix: str) -> None:
        for key, value in data.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{key}.")
            else:
                out[f"{prefix}{key}"] = value

    walk(model.model_dump(mode="json"), "model.")
    return out


def series(record: Mapping[str, Any]) -> str:
    """`attention/sdpa`, `attention/math`, `ssog`: the label of a record's curve."""
    backend = record.get("attention_backend")
    return f"{record['mixer']}/{backend}" if record["mixer"] == "attention" and backend else record["mixer"]


def _clean(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def to_table(records: Iterable[Mapping[str, Any]], metadata: Mapping[str, str] | None = None) -> pa.Table:
    """Records -> an Arrow table with exactly `schema()` (unknown keys dropped, missing ones null)."""
    full = schema()
    rows = [{f: _clean(r.get(f)) for f in full.names} for r in records]
    table = pa.Table.from_pylist(rows, schema=full)
    if metadata:
        table = table.replace_schema_metadata({k.encode(): v.encode() for k, v in metadata.items()})
    return table


def write_parquet(records: Iterable[Mapping[str, Any]], path: str | Path, config=None) -> Path:
    """Write the records to `path`; the sweep's BenchmarkConfig travels in the schema metadata."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {BENCHMARK_META.decode(): config.model_dump_json()} if config is not None else None
    pq.write_table(to_table(records, meta), path)
    return path


def to_json(records: Iterable[Mapping[str, Any]], indent: int | None = 2) -> str:
    """Strict JSON (non-finite floats become null)."""
    return json.dumps([{k: _clean(v) for k, v in r.items()} for r in records], indent=indent)
