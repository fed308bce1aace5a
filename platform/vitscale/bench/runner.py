"""`run_benchmark`: every configuration of a BenchmarkConfig, measured one after another.

Configurations run in `BenchmarkConfig.configurations()` order (regime, resolution, mixer,
backend), so the mixers being compared are measured back to back under the same machine load.
On CPU each one runs in its own subprocess (peak RSS per configuration, see `isolate`); on
CUDA in this process, where the allocator's counters are per configuration already.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vitscale.bench.isolate import idle_baseline_mb, run_isolated
from vitscale.bench.measure import measure_configuration, resolve_device
from vitscale.bench.records import series


def label(point: dict[str, Any]) -> str:
    """`ssog ode 512` / `attention/sdpa discrete 224`."""
    return f"{series(point)} {point['regime']} {point['resolution']}"


def run_benchmark(
    config,
    progress: bool = True,
    *,
    isolate: bool | None = None,
    console: Console | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every configuration; return one record per configuration (see `records`).

    isolate: one subprocess per configuration (default: on CPU, where it is how peak memory
    is measured). An `oom` or `error` configuration is recorded and the sweep goes on.
    """
    device = resolve_device(config.device)
    isolate = device == "cpu" if isolate is None else isolate
    points = config.configurations()
    console = console or Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    records = []
    with Progress(*columns, console=console, transient=True, disable=not progress) as bar:
        task = bar.add_task("bench: idle baseline" if isolate else "bench", total=len(points))
        baseline = idle_baseline_mb(config.threads) if isolate and device == "cpu" else None
        for point in points:
            bar.update(task, description=f"bench: {label(point)}")
            if isolate:
                record = run_isolated(config, point, device)
            else:
                record = measure_configuration(config, point, device=device)
            if device == "cpu" and isolate:
                record["baseline_memory_mb"] = baseline
            records.append(record)
            if on_record is not None:
                on_record(record)
            bar.advance(task)
    return records
