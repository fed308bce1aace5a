"""Measure one configuration in this process: build, count, time, read the peak memory.

Every mixer gets the same seed (so the same initialisation draws and, above all, the same
input images and labels, generated on the CPU from `seed` whatever the device) and the same
batch size. The forward used to count FLOPs runs before the clock and the peak-memory reset,
so it is neither timed nor counted as warmup. Any exception ends this configuration only:
out-of-memory becomes status `out_of_memory`, anything else `error` with its first line.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from vitscale import openmp
from vitscale.bench.contention import cpu_wall_ratio
from vitscale.bench.memory import cuda_peak_mb, cuda_reset, is_oom, own_peak_rss_mb, release
from vitscale.bench.paired import paired_metrics
from vitscale.bench.records import blank_record
from vitscale.bench.timing import (
    inference_step,
    precision,
    relative_spread,
    summarise,
    synchronizer,
    time_iterations,
    train_step,
)
from vitscale.device import resolve_device
from vitscale.errors import OUT_OF_MEMORY
from vitscale.models import ModelConfig, build, count_params
from vitscale.models.measure import flop_counter


def model_config(config, point: Mapping[str, Any]) -> ModelConfig:
    """The ModelConfig of one configuration, built at the measured resolution."""
    return config.model_for(point)


def effective_warmup(config) -> int:
    """torch.compile compiles on the first call: at least one untimed iteration then."""
    return max(config.warmup, 1) if config.compile else config.warmup


TIMING_KEYS = (
    "images_per_second",
    "latency_ms",
    "latencies_ms",
    "latency_spread",
    "cpu_ms",
    "cpu_spread",
    "cpu_wall_ratio",
)


def idle_peak_mb() -> float:
    """This worker's peak RSS with everything a measurement loads but the model: counting FLOPs
    imports sympy and ~800 modules at its first use (~85 MB, the same for every configuration, and
    all that a tiny model's "peak above idle" was before they were loaded first)."""
    with torch.inference_mode(), flop_counter():
        torch.ones(2, 2) @ torch.ones(2, 2)
    return own_peak_rss_mb()


def _start(config, point: Mapping[str, Any], dev: torch.device) -> dict[str, Any]:
    record = blank_record(config, point, dev.type)
    if config.threads:
        torch.set_num_threads(config.threads)
    record["threads"] = torch.get_num_threads()
    record["omp_wait_policy"] = os.environ.get(openmp.WAIT_POLICY)  # as the worker started (vitscale.openmp)
    record["warmup"] = effective_warmup(config)
    return record


def _fail(record: dict[str, Any], exc: BaseException) -> None:
    """Status `out_of_memory` or `error` with the exception's first line; no timing is reported."""
    lines = str(exc).strip().splitlines()
    record["status"] = OUT_OF_MEMORY if is_oom(exc) else "error"
    record["error"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
    for key in TIMING_KEYS:
        record[key] = None


def measure_configuration(
    config,
    point: Mapping[str, Any],
    *,
    device: str | None = None,
    process_rss: bool = False,
    build_model: Callable[[ModelConfig], nn.Module] | None = None,
) -> dict[str, Any]:
    """The record of `point` under `config` (a BenchmarkConfig).

    process_rss: on CPU, report this process's peak RSS above its own idle peak, read before the
    model is built (`peak_memory_mb`, memory_kind `rss_above_idle`; the idle peak is
    `baseline_memory_mb`, the whole process `process_peak_rss_mb`) — only meaningful in a
    subprocess that measures nothing else (`vitscale.bench.isolate`); otherwise the CPU peak is
    left empty rather than reporting an earlier configuration's high-water mark.
    build_model: ModelConfig -> module (default `vitscale.models.build`, looked up per call).
    """
    dev = torch.device(device or resolve_device(config.device))
    record = _start(config, point, dev)
    if dev.type == "cpu" and process_rss:  # the idle worker: imported, configured, no model yet
        record["baseline_memory_mb"] = idle_peak_mb()
    try:
        model, step = _prepare(record, config, point, dev, build_model or build)
        if dev.type == "cuda":
            record["baseline_memory_mb"] = cuda_reset(dev)
        cpu_times: list[float] = []
        times = time_iterations(step, effective_warmup(config), config.repeats, synchronizer(dev), cpu_times)
        if dev.type == "cuda":
            record["peak_memory_mb"], record["memory_kind"] = cuda_peak_mb(dev), "cuda_max_allocated"
        elif process_rss:
            record["process_peak_rss_mb"] = own_peak_rss_mb()
            record["peak_memory_mb"] = record["process_peak_rss_mb"] - record["baseline_memory_mb"]
            record["memory_kind"] = "rss_above_idle"
        _finish(record, config, model, times, cpu_times, dev)
        record["timing"] = "sequential"
        del model, step
    except Exception as exc:  # one configuration fails, the sweep goes on
        _fail(record, exc)
    release(dev)  # outside the except block: the traceback no longer pins the tensors
    return record


def measure_interleaved(
    config,
    points: list[Mapping[str, Any]],
    *,
    device: str | None = None,
    count_flops: bool = True,
    build_model: Callable[[ModelConfig], nn.Module] | None = None,
) -> list[dict[str, Any]]:
    """Time several configurations round-robin in this process: every model is built, each is
    warmed up, then repetition r times one iteration of each, starting at the r-th model.

    The configurations compared see the same machine load, which a shared CPU makes the only
    honest way to take their ratios. Peak memory is not measured here (all models live in
    one process); take it from one isolated run per configuration.
    """
    dev = torch.device(device or resolve_device(config.device))
    records, live = [], []
    for point in points:
        record = _start(config, point, dev)
        records.append(record)
        try:
            live.append(
                [record, *_prepare(record, config, point, dev, build_model or build, count_flops), [], []]
            )
        except Exception as exc:
            _fail(record, exc)
    sync = synchronizer(dev)

    def attempt(entry, fn) -> None:
        try:
            fn(entry)
        except Exception as exc:
            _fail(entry[0], exc)
            live.remove(entry)

    for entry in list(live):
        attempt(entry, lambda e: time_iterations(e[2], effective_warmup(config), 0, sync))
    for rep in range(config.repeats):
        for entry in live[rep % len(live) :] + live[: rep % len(live)] if live else []:
            attempt(entry, lambda e: e[3].extend(time_iterations(e[2], 0, 1, sync, e[4])))
    for record, model, _, times, cpu_times in live:
        _finish(record, config, model, times, cpu_times, dev)
        record["timing"] = "interleaved"
    live.clear()
    release(dev)
    return records


def measure_paired(
    config,
    point: Mapping[str, Any],
    refs: list[Mapping[str, Any]],
    *,
    device: str | None = None,
    build_model: Callable[[ModelConfig], nn.Module] | None = None,
) -> dict[str, Any]:
    """`point` alone for one iteration (its peak memory; above this process's idle peak on CPU),
    then `point` and `refs` round-robin (its timing and, per reference, `paired_*`: bench.paired).
    A failed reference leaves only its ratios out; a failed round-robin keeps the one iteration."""
    alone = config.model_copy(update={"warmup": 0, "repeats": 1})
    record = measure_configuration(alone, point, device=device, process_rss=True, build_model=build_model)
    record["warmup"], record["repeats"] = effective_warmup(config), config.repeats
    if record["status"] != "ok":
        return record
    timed = measure_interleaved(
        config, [point, *refs], device=device, count_flops=False, build_model=build_model
    )
    own = timed[0]
    if own["status"] != "ok":
        record.update(timing="single", warmup=0, repeats=1)
        record["error"] = f"paired timing failed: {own.get('error') or own['status']}"
        return record
    record.update({k: own[k] for k in (*TIMING_KEYS, "timing", "nfe")})
    record.update(paired_metrics(own, timed[1:]))
    return record


def _prepare(record, config, point, dev, build_model, count_flops: bool = True):
    """(model, step): the seeded model on `dev`, its inputs, FLOPs counted, one iteration's closure."""
    torch.manual_seed(config.seed)
    model = build_model(model_config(config, point)).to(dev)
    record["params"] = count_params(model)
    gen = torch.Generator().manual_seed(config.seed)
    side = int(point["resolution"])
    images = torch.randn(config.batch_size, config.model.in_chans, side, side, generator=gen).to(dev)
    labels = torch.randint(0, config.model.num_classes, (config.batch_size,), generator=gen).to(dev)
    if count_flops:
        model.eval()
        with torch.inference_mode(), precision(dev, config.dtype), flop_counter() as counter:
            model(images)
        record["flops_per_image"] = counter.get_total_flops() / config.batch_size
    mode = None if config.compile_mode == "default" else config.compile_mode
    runner = torch.compile(model, mode=mode) if config.compile else model
    if config.mode == "train":
        return model, train_step(runner, images, labels, dev, config.dtype)
    return model, inference_step(runner, images, dev, config.dtype)


def _finish(record, config, model, times: list[float], cpu_times: list[float], dev) -> None:
    record.update(summarise(times, config.batch_size), status="ok")
    record["latencies_ms"] = [1e3 * t for t in times]
    if dev.type == "cpu":
        record["cpu_ms"] = 1e3 * statistics.median(cpu_times)
        record["cpu_spread"] = relative_spread(cpu_times)
        record["cpu_wall_ratio"] = cpu_wall_ratio(cpu_times, times, record["threads"])
    nfe = getattr(model, "last_nfe", None)
    record["nfe"] = int(nfe) if nfe is not None else None
