"""Measure one configuration in this process: build, count, time, read the peak memory.

Every mixer gets the same seed (so the same initialisation draws and, above all, the same
input images and labels, generated on the CPU from `seed` whatever the device) and the same
batch size. A configuration's dtype, batch size and compile flag are its own (its variant,
`BenchmarkConfig.variant`), so variants of one model are timed side by side like mixers. A
compiled configuration's first call (compilation, plus one iteration) is timed apart from its
warmup: `compile_seconds`. The forward used to count FLOPs runs before the clock and the peak-memory reset,
so it is neither timed nor counted as warmup. Any exception ends this configuration only:
out-of-memory becomes status `out_of_memory`, anything else `error` with its first line.
"""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import Tensor, nn

from vitscale import openmp
from vitscale.bench.contention import cpu_wall_ratio
from vitscale.bench.memory import (
    cuda_peak_mb,
    cuda_reset,
    is_oom,
    own_peak_rss_mb,
    release,
    reset_peak_rss,
)
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
from vitscale.models.regions import compile_regions


def model_config(config, point: Mapping[str, Any]) -> ModelConfig:
    """The ModelConfig of one configuration, built at the measured resolution."""
    return config.model_for(point)


def effective_warmup(config, point: Mapping[str, Any] | None = None) -> int:
    """torch.compile compiles on the first call: at least one untimed iteration then (for the
    point's variant; without a point, for any compiled variant of the config)."""
    compiled = config.variant(point).compile if point is not None else any(config.compiles)
    return max(config.warmup, 1) if compiled else config.warmup


def compile_limits(config, points: list[Mapping[str, Any]]) -> contextlib.AbstractContextManager:
    """Dynamo's recompile limit raised to cover every compiled configuration of one process (their
    models share code objects: ViT.forward, Block.forward), and a hit made an error: past the limit
    dynamo would otherwise run the frame eagerly, and a "compiled" timing would be eager's."""
    compiled = sum(config.variant(p).compile for p in points)
    if not compiled:
        return contextlib.nullcontext()
    import torch._dynamo

    limit = max(torch._dynamo.config.recompile_limit, 8 * compiled)
    return torch._dynamo.config.patch(recompile_limit=limit, fail_on_recompile_limit_hit=True)


TIMING_KEYS = (
    "images_per_second",
    "latency_ms",
    "latencies_ms",
    "latency_spread",
    "cpu_ms",
    "cpu_spread",
    "cpu_wall_ratio",
    "compile_seconds",
)


def _compile_alone() -> None:
    """Forget the graphs of configurations compiled before in this process (CUDA measures them one
    after another in one): the next is compiled as in a process of its own, and theirs count
    toward no recompile limit."""
    import torch._dynamo

    torch._dynamo.reset()


def idle_peak_mb() -> float:
    """This worker's peak RSS with everything a measurement loads but the model: counting FLOPs
    imports sympy and ~800 modules at its first use (~85 MB, the same for every configuration, and
    all that a tiny model's "peak above idle" was before they were loaded first). Where the peak
    can be reset (`memory.reset_peak_rss`) it is, first: the idle RSS, from which each mode's peak
    is then measured after its own reset."""
    with torch.inference_mode(), flop_counter():
        torch.ones(2, 2) @ torch.ones(2, 2)
    reset_peak_rss()
    return own_peak_rss_mb()


def _start(config, point: Mapping[str, Any], dev: torch.device) -> dict[str, Any]:
    record = blank_record(config, point, dev.type)
    if config.threads:
        torch.set_num_threads(config.threads)
    record["threads"] = torch.get_num_threads()
    record["omp_wait_policy"] = os.environ.get(openmp.WAIT_POLICY)  # as the worker started (vitscale.openmp)
    record["warmup"] = effective_warmup(config, point)
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
    timed: bool = True,
    on_partial: Callable[[dict[str, Any]], None] | None = None,
    build_model: Callable[[ModelConfig], nn.Module] | None = None,
) -> dict[str, Any]:
    """The record of `point` under `config` (a BenchmarkConfig).

    Memory (CUDA always; CPU with process_rss) comes first, from one eager iteration of each mode
    (`measure_memory`); then, if `timed`, the seeded model is built again (the training step
    moved its weights), compiled if asked, and timed. Untimed, the record keeps the timed mode's
    one eager iteration of the memory phase (`timing` single): what `runner` falls back on when the
    interleaved timing fails. So a configuration is compiled once, where it is timed.
    process_rss: on CPU, memory as this process's peak RSS above its own idle peak, read before the
    model is built (memory_kind `rss_above_idle`; the idle peak is `baseline_memory_mb`) — only
    meaningful in a subprocess that measures nothing else (`vitscale.bench.isolate`); otherwise
    the CPU peaks are left empty rather than reporting an earlier configuration's high-water mark.
    on_partial: called with the record as it stands once inference memory is in, before the
    training step of an inference sweep (which may meet the OOM killer on CPU), so the worker can
    hand that much back (`config.train_memory` off skips that step).
    build_model: ModelConfig -> module (default `vitscale.models.build`, looked up per call).
    """
    dev = torch.device(device or resolve_device(config.device))
    record = _start(config, point, dev)
    build_model = build_model or build
    if dev.type == "cpu" and process_rss:  # the idle worker: imported, configured, no model yet
        record["baseline_memory_mb"] = idle_peak_mb()
    try:
        model, images, labels = _build(record, config, point, dev, build_model)
        sample: tuple[list[float], list[float]] = ([], [])
        if dev.type == "cuda" or process_rss:
            sample = measure_memory(record, config, model, images, labels, dev, on_partial, timed)
            if timed:
                del model
                model, images, labels = _build(record, config, point, dev, build_model, count_flops=False)
        if timed:
            if config.variant(point).compile:
                _compile_alone()
            with compile_limits(config, [point]):
                step = _step(config, point, model, images, labels, dev)
                sync, cpu_times = synchronizer(dev), []
                _warm_up(record, config, point, step, sync)
                sample = (time_iterations(step, 0, config.repeats, sync, cpu_times), cpu_times)
            del step
        _finish(record, config, point, model, *sample, dev)
        record["timing"] = "sequential" if timed else "single"
        del model
    except Exception as exc:  # one configuration fails, the sweep goes on
        _fail(record, exc)
    release(dev)  # outside the except block: the traceback no longer pins the tensors
    return record


def measure_memory(
    record: dict[str, Any],
    config,
    model: nn.Module,
    images: Tensor,
    labels: Tensor,
    dev: torch.device,
    on_partial: Callable[[dict[str, Any]], None] | None = None,
    timed: bool = False,
) -> tuple[list[float], list[float]]:
    """`inference_memory_mb` and `train_memory_mb` (forward + backward + AdamW step) from one eager
    iteration each, every peak read alone: CUDA's counters reset, the CPU's VmHWM lowered to the
    current RSS (`memory.reset_peak_rss`; where that fails, no train-mode peak is reported rather
    than one that includes the inference peak). `peak_memory_mb` is the sweep's mode's. Eager even
    under `compile`: a compiling process's RSS counts the compiler, and compiling here as well as
    where the configuration is timed paid ~95 s twice on CPU. A training step that runs out of
    memory in an inference sweep leaves `train_memory_mb` empty and says so in `error`; in a
    train sweep it fails the configuration. Before that step, `on_partial` gets the record so far:
    status ok with its one eager iteration where nothing more will be timed, else not ok (what a
    worker killed in that step hands back: its inference memory, and why it has no timing).
    Returns the sweep's mode's iteration (wall, CPU s)."""
    sample: tuple[list[float], list[float]] = ([], [])
    dtype = record["dtype"]
    steps = {"inference": lambda: inference_step(model, images, dev, dtype)}
    if config.train_memory or config.mode == "train":
        steps["train"] = lambda: train_step(model, images, labels, dev, dtype)
    for mode, make_step in steps.items():
        if dev.type == "cuda":
            allocated, readable = cuda_reset(dev), True
            if mode == "inference":  # weights and inputs
                record["baseline_memory_mb"] = allocated
        else:  # without a reset, a peak runs from the idle one: the sweep's mode's is reported so
            readable = reset_peak_rss() or mode in ("inference", config.mode)
        if not readable:
            continue
        if mode == "train" and config.mode == "inference" and on_partial is not None:
            partial = {**record, "error": "train-mode memory: the worker died in its training step"}
            if not timed:
                _finish(partial, config, record, model, *sample, dev)
                partial["timing"] = "single"
            on_partial(partial)
        cpu: list[float] = []
        try:
            wall = time_iterations(make_step(), 0, 1, synchronizer(dev), cpu)
        except Exception as exc:
            if mode == config.mode or not is_oom(exc):
                raise
            record["error"] = f"train-mode memory: {OUT_OF_MEMORY}: {type(exc).__name__}"
            continue
        peak = cuda_peak_mb(dev) if dev.type == "cuda" else own_peak_rss_mb() - record["baseline_memory_mb"]
        record[f"{mode}_memory_mb"] = peak
        if mode == config.mode:
            sample = (wall, cpu)
    record["peak_memory_mb"] = record.get(f"{config.mode}_memory_mb")
    record["memory_kind"] = "cuda_max_allocated" if dev.type == "cuda" else "rss_above_idle"
    if dev.type == "cpu" and record["peak_memory_mb"] is not None:
        record["process_peak_rss_mb"] = record["baseline_memory_mb"] + record["peak_memory_mb"]
    return sample


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
    with compile_limits(config, points):
        for point in points:
            record = _start(config, point, dev)
            records.append(record)
            try:
                model, images, labels = _build(record, config, point, dev, build_model or build, count_flops)
                live.append([record, model, _step(config, point, model, images, labels, dev), [], [], point])
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
            attempt(entry, lambda e: _warm_up(e[0], config, e[5], e[2], sync))
        for rep in range(config.repeats):
            for entry in live[rep % len(live) :] + live[: rep % len(live)] if live else []:
                attempt(entry, lambda e: e[3].extend(time_iterations(e[2], 0, 1, sync, e[4])))
    for record, model, _, times, cpu_times, point in live:
        _finish(record, config, point, model, times, cpu_times, dev)
        record["timing"] = "interleaved"
    live.clear()
    release(dev)
    return records


def _build(record, config, point, dev, build_model, count_flops: bool = True):
    """(model, images, labels): the seeded model on `dev` and its seeded inputs, FLOPs counted."""
    variant = config.variant(point)
    torch.manual_seed(config.seed)
    model = build_model(model_config(config, point)).to(dev)
    record["params"] = count_params(model)
    gen = torch.Generator().manual_seed(config.seed)
    side, batch = int(point["resolution"]), variant.batch_size
    images = torch.randn(batch, config.model.in_chans, side, side, generator=gen).to(dev)
    labels = torch.randint(0, config.model.num_classes, (batch,), generator=gen).to(dev)
    if count_flops:
        model.eval()
        with torch.inference_mode(), precision(dev, variant.dtype), flop_counter() as counter:
            model(images)
        record["flops_per_image"] = counter.get_total_flops() / batch
    return model, images, labels


def _step(config, point, model: nn.Module, images: Tensor, labels: Tensor, dev) -> Callable[[], Tensor]:
    """One timed iteration of the sweep's mode in the point's dtype, through torch.compile if its
    variant asks (static shapes: each batch size its own graph, as a fixed-batch run would get)."""
    variant = config.variant(point)
    runner = compile_regions(model, config.compile_mode, dynamic=False) if variant.compile else model
    if config.mode == "train":
        return train_step(runner, images, labels, dev, variant.dtype)
    return inference_step(runner, images, dev, variant.dtype)


def _warm_up(record, config, point, step: Callable[[], object], sync: Callable[[], None]) -> None:
    """The point's untimed iterations; a compiled one's first call, which compiles, timed apart
    (`compile_seconds`: compilation plus one iteration, wall clock)."""
    warmup = effective_warmup(config, point)
    if config.variant(point).compile:
        record["compile_seconds"] = sum(time_iterations(step, 0, 1, sync))
        warmup -= 1
    time_iterations(step, warmup, 0, sync)


def _finish(record, config, point, model, times: list[float], cpu_times: list[float], dev) -> None:
    record.update(summarise(times, config.variant(point).batch_size), status="ok")
    record["latencies_ms"] = [1e3 * t for t in times]
    if dev.type == "cpu":
        record["cpu_ms"] = 1e3 * statistics.median(cpu_times)
        record["cpu_spread"] = relative_spread(cpu_times)
        record["cpu_wall_ratio"] = cpu_wall_ratio(cpu_times, times, record["threads"])
    nfe = getattr(model, "last_nfe", None)
    record["nfe"] = int(nfe) if nfe is not None else None
