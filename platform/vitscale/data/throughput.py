"""How fast the data path delivers augmented training images (`vitscale data info --throughput`).

The issue's bar: the data path must outrun the model. This measures exactly what the
trainer consumes — `train_batches` (shuffle, gather or read and decode from disk, crop, flip,
resize, normalise) — on the bundle's device, synchronising CUDA so the figure is honest.
"""

from __future__ import annotations

import itertools
import time

import torch

from vitscale.data.batches import Bundle, make_generator, train_batches
from vitscale.data.config import DataConfig


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throughput(
    bundle: Bundle,
    config: DataConfig,
    batch_size: int = 128,
    seconds: float = 2.0,
    warmup: int = 2,
    epochs: int | None = None,
) -> dict:
    """Augmented training images per second at `config.resolution`, after `warmup` batches, over
    `seconds` (at least 3 batches), or over `epochs` whole epochs where given (the warmup batches
    then count, and the time the first batch waits for its workers)."""
    gen = make_generator(bundle, 0)
    passes = range(epochs) if epochs is not None else itertools.count()
    stream = (batch for _ in passes for batch in train_batches(bundle, config, batch_size, gen))
    if epochs is None:
        for _ in range(warmup):
            next(stream)
    _sync(bundle.device)
    images, count, elapsed, start = 0, 0, 0.0, time.perf_counter()
    for x, _ in stream:
        images += x.shape[0]
        count += 1
        _sync(bundle.device)
        elapsed = time.perf_counter() - start
        if epochs is None and elapsed >= seconds and count >= 3:
            break
    return {
        "images_per_second": images / max(elapsed, 1e-9),
        "batches": count,
        "images": images,
        "batch_size": min(batch_size, int(bundle.train_labels.numel())),
        "resolution": config.resolution,
        "source_size": list(bundle.source_size),
        "device": str(bundle.device),
    }
