"""`run_benchmark`: every configuration of a BenchmarkConfig, cell by cell.

A cell is one regime x resolution: the configurations whose ratios the table reports — every
mixer (and attention backend) in every variant (dtype x batch size x compile) the sweep lists.
They run in `BenchmarkConfig.configurations()` order. On CUDA each is measured in this process, one
after another (the allocator's counters are per configuration, and a GPU is not shared).
On CPU each configuration first runs alone in a fresh subprocess for its peak RSS above that
subprocess's idle peak (one eager inference iteration and one training step, untimed, never
compiled: see `measure.measure_memory`), then the cell's configurations are timed together in one
more subprocess, round-robin (`measure.measure_interleaved`): on a machine shared with other work
the load changes from minute to minute, and only iterations interleaved with each other see
the same load, so only they give honest ratios. Memory needs a process per configuration and
timing one per cell, and a compiled model cannot move between processes: so only the timing
worker compiles, and `--compile` is paid once per configuration. Memory being eager, a compiled
configuration takes its eager twin's memory record where the cell has one (same mixer, dtype and
batch size) rather than measuring it again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from vitscale.bench.isolate import run_isolated, run_isolated_cell
from vitscale.bench.measure import (
    TIMING_KEYS,
    effective_warmup,
    measure_configuration,
    measure_interleaved,
)
from vitscale.bench.paired import paired_metrics
from vitscale.bench.records import series
from vitscale.device import resolve_device


def label(point: dict[str, Any]) -> str:
    """`ssog ode 512` / `attention/sdpa discrete 224`."""
    return f"{series(point)} {point['regime']} {point['resolution']}"


def cells(points: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Consecutive configurations of one regime x resolution."""
    out: list[list[dict[str, Any]]] = []
    for point in points:
        if out and (out[-1][0]["regime"], out[-1][0]["resolution"]) == (point["regime"], point["resolution"]):
            out[-1].append(point)
        else:
            out.append([point])
    return out


def _memory_key(point: dict[str, Any]) -> tuple:
    """What a configuration's (eager) memory depends on: everything but its compile flag."""
    return tuple(sorted((k, v) for k, v in point.items() if k != "compile"))


def measure_cell_isolated(config, cell: list[dict[str, Any]], device: str = "cpu") -> list[dict[str, Any]]:
    """Peak memory of each configuration alone (a compiled one shares its eager twin's), then their
    timing round-robin in one worker."""
    memory: dict[tuple, dict[str, Any]] = {}
    records = []
    for point in cell:
        twin = memory.get(_memory_key(point))
        if twin is None:
            record = memory[_memory_key(point)] = run_isolated(config, point, device, timed=False)
        else:
            compiled = config.variant(point).compile
            record = {**twin, "compile": compiled, "compile_mode": config.compile_mode if compiled else None}
        records.append(record)
    ok = [i for i, r in enumerate(records) if r["status"] == "ok"]
    timed, reason = run_isolated_cell(config, [cell[i] for i in ok], device) if ok else ([], "")
    for i, record in enumerate(records):
        if i in ok:
            with_timing(record, config, timed[ok.index(i)] if timed is not None else None, reason)
    return records


def with_timing(record: dict[str, Any], config, timing: dict[str, Any] | None, reason: str = "") -> None:
    """A memory record (one eager iteration) completed by its round-robin timing, or kept with
    that one iteration and the reason its timing failed."""
    record["warmup"], record["repeats"] = effective_warmup(config, record), config.repeats
    if timing is not None and timing["status"] == "ok":
        record.update({k: timing[k] for k in (*TIMING_KEYS, "timing", "nfe")})
    else:
        record.update(timing="single", warmup=0, repeats=1)
        failed = f"interleaved timing failed: {(timing or {}).get('error') or reason}"
        record["error"] = "; ".join(filter(None, (record.get("error"), failed)))


def measure_paired(
    config, point: dict[str, Any], refs: list[dict[str, Any]], device: str = "cpu"
) -> dict[str, Any]:
    """A benchmark trial's record (bench.paired): its memory alone (a worker of its own on CPU),
    then its timing round-robin beside `refs`, with its ratios to them (`paired_*`)."""
    if device == "cpu":
        record = run_isolated(config, point, device, timed=False)
    else:
        record = measure_configuration(config, point, device=device, timed=False)
    if record["status"] != "ok":
        return record
    if device == "cpu":
        timed, reason = run_isolated_cell(config, [point, *refs], device)
    else:
        timed, reason = measure_interleaved(config, [point, *refs], device=device, count_flops=False), ""
    with_timing(record, config, timed[0] if timed else None, reason)
    if timed and timed[0]["status"] == "ok":
        record.update(paired_metrics(timed[0], timed[1:]))
    return record


def run_benchmark(
    config,
    progress: bool = True,
    *,
    isolate: bool | None = None,
    interleave: bool | None = None,
    console: Console | None = None,
    on_record: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Measure every configuration; return one record per configuration (see `records`).

    isolate: one subprocess per configuration for its peak memory (default: on CPU).
    interleave: time each cell's configurations round-robin (default: on CPU). An `out_of_memory` or
    `error` configuration is recorded and the sweep goes on.
    """
    device = str(resolve_device(config.device))
    isolate = device == "cpu" if isolate is None else isolate
    interleave = device == "cpu" if interleave is None else interleave
    points = config.configurations()
    console = console or Console(stderr=True)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    records = []
    with Progress(*columns, console=console, transient=True, disable=not progress) as bar:
        task = bar.add_task("bench", total=len(points))
        for cell in cells(points):
            bar.update(task, description=f"bench: {cell[0]['regime']} {cell[0]['resolution']}")
            if interleave and isolate:
                measured = measure_cell_isolated(config, cell, device)
            elif interleave:
                measured = measure_interleaved(config, cell, device=device)
            elif isolate:
                measured = [run_isolated(config, point, device) for point in cell]
            else:
                measured = [measure_configuration(config, point, device=device) for point in cell]
            for record in measured:
                records.append(record)
                if on_record is not None:
                    on_record(record)
                bar.advance(task)
    return records
