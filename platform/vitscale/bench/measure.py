"""Measure one configuration in this process: build, count, time, read the peak memory.

Every mixer gets the same seed (so the same initialisation draws and, above all, the same
input images and labels, generated on the CPU from `seed` whatever the device) and the same
batch size. The forward used to count FLOPs runs before the clock and the peak-memory reset,
so it is neither timed nor counted as warmup. Any exception ends this configuration only:
out-of-memory becomes status `oom`, anything else `error` with its first line.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from typing import Any

import torch
from torch import nn

from vitscale.bench.memory import cuda_peak_mb, cuda_reset, is_oom, own_peak_rss_mb, release
from vitscale.bench.records import blank_record
from vitscale.bench.timing import (
    inference_step,
    precision,
    summarise,
    synchronizer,
    time_iterations,
    train_step,
)
from vitscale.errors import UserError
from vitscale.models import ModelConfig, build, count_params
from vitscale.models.measure import flop_counter


def resolve_device(name: str) -> str:
    """`auto` -> cuda when available, else cpu; `cuda` without a GPU is a user error."""
    if name == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise UserError("device: cuda requested but torch sees no CUDA device; pass --device cpu or auto")
    return name


def model_config(config, point: Mapping[str, Any]) -> ModelConfig:
    """The ModelConfig of one configuration, built at the measured resolution."""
    return ModelConfig(
        mixer=point["mixer"],
        regime=point["regime"],
        width=config.width,
        depth=config.depth,
        heads=config.heads,
        patch_size=config.patch_size,
        num_gaussians=config.num_gaussians,
        num_classes=config.num_classes,
        image_size=int(point["resolution"]),
        attention_backend=point.get("attention_backend") or "sdpa",
        ode=config.ode,
    )


def effective_warmup(config) -> int:
    """torch.compile compiles on the first call: at least one untimed iteration then."""
    return max(config.warmup, 1) if config.compile else config.warmup


def measure_configuration(
    config,
    point: Mapping[str, Any],
    *,
    device: str | None = None,
    process_rss: bool = False,
    build_model: Callable[[ModelConfig], nn.Module] | None = None,
) -> dict[str, Any]:
    """The record of `point` under `config` (a BenchmarkConfig).

    process_rss: report this process's peak RSS as the peak memory on CPU — only meaningful
    in a subprocess that measures nothing else (`vitscale.bench.isolate`); otherwise the CPU
    peak is left empty rather than reporting an earlier configuration's high-water mark.
    build_model: ModelConfig -> module (default `vitscale.models.build`, looked up per call).
    """
    dev = torch.device(device or resolve_device(config.device))
    record = blank_record(config, point, dev.type)
    if config.threads:
        torch.set_num_threads(config.threads)
    record["threads"] = torch.get_num_threads()
    record["warmup"] = effective_warmup(config)
    failure: str | None = None
    try:
        _measure(record, config, point, dev, build_model or build, process_rss)
        record["status"] = "ok"
    except Exception as exc:  # one configuration fails, the sweep goes on
        failure = "oom" if is_oom(exc) else "error"
        lines = str(exc).strip().splitlines()
        record["error"] = f"{type(exc).__name__}: {lines[0] if lines else ''}"[:500]
    if failure:
        record["status"] = failure
        for key in ("images_per_second", "latency_ms", "latencies_ms", "cpu_ms"):
            record[key] = None
    release(dev)  # outside the except block: the traceback no longer pins the tensors
    return record


def _measure(record, config, point, dev, build_model, process_rss) -> None:
    torch.manual_seed(config.seed)
    model = build_model(model_config(config, point)).to(dev)
    record["params"] = count_params(model)
    gen = torch.Generator().manual_seed(config.seed)
    side = int(point["resolution"])
    images = torch.randn(config.batch_size, 3, side, side, generator=gen).to(dev)
    labels = torch.randint(0, config.num_classes, (config.batch_size,), generator=gen).to(dev)

    model.eval()
    with torch.inference_mode(), precision(dev, config.dtype), flop_counter() as counter:
        model(images)
    record["flops_per_image"] = counter.get_total_flops() / config.batch_size

    runner = torch.compile(model) if config.compile else model
    if config.mode == "train":
        step = train_step(runner, images, labels, dev, config.dtype)
    else:
        step = inference_step(runner, images, dev, config.dtype)
    if dev.type == "cuda":
        record["baseline_memory_mb"] = cuda_reset(dev)
    cpu_times: list[float] = []
    times = time_iterations(step, effective_warmup(config), config.repeats, synchronizer(dev), cpu_times)
    if dev.type == "cuda":
        record["peak_memory_mb"], record["memory_kind"] = cuda_peak_mb(dev), "cuda_max_allocated"
    elif process_rss:
        record["peak_memory_mb"], record["memory_kind"] = own_peak_rss_mb(), "process_peak_rss"
    record.update(summarise(times, config.batch_size))
    record["latencies_ms"] = [1e3 * t for t in times]
    if dev.type == "cpu":
        record["cpu_ms"] = 1e3 * statistics.median(cpu_times)
    nfe = getattr(model, "last_nfe", None)
    record["nfe"] = int(nfe) if nfe is not None else None
