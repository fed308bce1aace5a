"""How fast the data path delivers augmented training images (`vitscale data info --throughput`).

The issue's bar: the data path must outrun the model. This measures exactly what the
trainer consumes — `train_batches` (shuffle, gather, crop, flip, resize, normalise) —
on the bundle's device, synchronising CUDA so the figure is honest.
"""

from __future__ import annotations

import time

import torch

from vitscale.data.batches import make_generator, train_batches
from vitscale.data.bundle import DataBundle
from vitscale.data.config import DataConfig


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def throughput(
    bundle: DataBundle, config: DataConfig, batch_size: int = 128, seconds: float = 2.0, warmup: int = 2
) -> dict:
    """Augmented training images per second at `config.resolution`, after `warmup` batches."""
    gen = make_generator(bundle, 0)

    def batches():
        while True:
            yield from train_batches(bundle, config, batch_size, gen)

    stream = batches()
    for _ in range(warmup):
        next(stream)
    _sync(bundle.device)
    images, count, start = 0, 0, time.perf_counter()
    while True:
        x, _ = next(stream)
        images += x.shape[0]
        count += 1
        _sync(bundle.device)
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and count >= 3:
            break
    return {
        "images_per_second": images / elapsed,
        "batches": count,
        "batch_size": min(batch_size, int(bundle.train_labels.numel())),
        "resolution": config.resolution,
        "source_size": list(bundle.source_size),
        "device": str(bundle.device),
    }
