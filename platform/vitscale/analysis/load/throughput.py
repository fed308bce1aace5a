"""Measured throughput for accuracy-at-resolution: a benchmark study's images/s per model
configuration and side, read from MLflow once and kept beside runs.parquet as throughput.parquet
(so `--from` redraws the same front offline).

A configuration is (mixer, regime, the mixer's backend, resolution, width, depth, patch size): the
things that set an untrained model's cost. Weights do not, so a benchmark of untrained models of
the trained arms' shape measures what the trained models would do.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import declared_backend, with_fields
from vitscale.analysis.load.runs import load_study_runs, read_snapshot, write_snapshot
from vitscale.errors import UserError

FILE = "throughput.parquet"
METRIC = "images_per_second"
MODEL_SHAPE = ("width", "depth", "patch_size")


def throughput_key(mixer, regime, backend, resolution, *shape) -> tuple:
    """Benchmarks name a backend only on the rows of a mixer that declares one; numbers compare as ints."""
    backend = backend if declared_backend(mixer) is not None else None
    return (
        mixer,
        regime,
        backend,
        *(int(v) if isinstance(v, int | float) else v for v in (resolution, *shape)),
    )


def throughput_table(bench: pa.Table) -> dict[tuple, float]:
    """configuration key -> mean images/s over the benchmark's finished runs of it."""
    if METRIC not in bench.column_names:
        return {}
    columns = ("mixer", "regime", "backend", "resolution", *MODEL_SHAPE)
    keys = zip(*(bench.column(c).to_pylist() for c in columns), strict=True)
    acc: dict[tuple, list[float]] = {}
    for key, value, status in zip(
        keys, bench.column(METRIC).to_pylist(), bench.column("status").to_pylist(), strict=True
    ):
        if status == "FINISHED" and isinstance(value, int | float) and math.isfinite(value):
            acc.setdefault(throughput_key(*key), []).append(float(value))
    return {k: float(np.mean(v)) for k, v in acc.items()}


def throughput_for(
    name: str | None, tracking_uri: str | None, out_dir: Path, from_parquet: Path | str | None
) -> tuple[dict[tuple, float], str]:
    """({configuration: images/s}, note) from benchmark study `name`: from MLflow (then written to
    out_dir/throughput.parquet), or from the throughput.parquet beside `--from`'s runs.parquet."""
    path = out_dir / FILE
    if from_parquet is not None:
        beside = Path(from_parquet).parent / FILE
        if not beside.is_file():
            return {}, f"no {FILE} beside {from_parquet}" if name else ""
        if beside.resolve() != path.resolve():
            path.write_bytes(beside.read_bytes())
    elif name:
        try:
            runs = load_study_runs(name, tracking_uri)
        except UserError as exc:
            return {}, f"throughput_from {name!r}: {exc}"
        if METRIC not in runs.metric_columns:  # images/s come from a study that measures them
            return {}, (
                f"throughput_from {name!r}: no run of this {runs.kind} study measured {METRIC}; "
                "name a benchmark study that ran"
            )
        write_snapshot(runs, path)
    else:
        path.unlink(missing_ok=True)
        return {}, ""
    table = throughput_table(with_fields(read_snapshot(path).table))
    return table, "" if table else f"{name or FILE} has no finished runs with {METRIC}"
