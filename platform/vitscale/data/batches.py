"""Batch iteration for the trainer: shuffled, augmented train batches and ordered eval batches.

All randomness of an epoch (the shuffle, crop offsets, flips) comes from the one
`torch.Generator` passed in, so saving `generator.get_state()` after an epoch and
restoring it with `set_state` resumes a run exactly. The data may be resident (`DataBundle`) or
streamed from disk (`StreamBundle`): this module decides which rows make each batch and draws
the augmentation; the bundle's `batches(split, parts)` fetches those rows' uint8 images (a gather
on the device, or DataLoader workers reading ahead), so both give the same batches for a seed.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from vitscale.data.augment import augment_batch, prepare_batch
from vitscale.data.bundle import DataBundle
from vitscale.data.config import DataConfig
from vitscale.data.stream_bundle import StreamBundle

Batch = tuple[torch.Tensor, torch.Tensor]  # (float32 images (B, C, R, R), int64 labels (B,))
Bundle = DataBundle | StreamBundle


def make_generator(bundle: Bundle, seed: int) -> torch.Generator:
    """A generator on the bundle's device (CUDA random ops need a CUDA generator), seeded."""
    return torch.Generator(device=bundle.device).manual_seed(seed)


def augmentation(bundle: Bundle, config: DataConfig) -> tuple[int, bool]:
    """(crop_padding, hflip): the config's choice where set, else the data set's default."""
    padding = bundle.crop_padding if config.crop_padding is None else config.crop_padding
    hflip = bundle.hflip if config.hflip is None else config.hflip
    return padding, hflip


def num_train_batches(bundle: Bundle, batch_size: int) -> int:
    """Steps per epoch of `train_batches` (for LR schedules)."""
    n = int(bundle.train_labels.numel())
    return max(1, n // batch_size) if n else 0


def train_batches(
    bundle: Bundle,
    config: DataConfig,
    batch_size: int,
    generator: torch.Generator,
    keep: slice = slice(None),
) -> Iterator[Batch]:
    """One epoch of shuffled, augmented batches; drop_last, except that a training set smaller
    than one batch gives a single batch of all of it (so tiny runs still train). With
    `data.train_resolutions` each batch is resized to a side drawn from that list (drawn once
    per epoch from `generator`, after the shuffle; with no list, or one side, nothing more is
    drawn, so `[28]` trains exactly as no list does). `keep`: the rows of each global batch this
    worker of a data-parallel trial trains on (`rank::world_size`: disjoint shards that cover the
    epoch once); its generator draws as one process does, so all workers stay in step."""
    n = int(bundle.train_labels.numel())
    if n == 0:
        return
    batch_size = min(batch_size, n)
    padding, hflip = augmentation(bundle, config)
    order = torch.randperm(n, generator=generator, device=generator.device).to(bundle.index_device)
    listed = config.train_resolutions or [config.resolution]
    sides = [listed[0]] * (n // batch_size)
    if len(set(listed)) > 1:
        drawn = torch.randint(
            len(config.train_resolutions), (len(sides),), generator=generator, device=generator.device
        )
        sides = [config.train_resolutions[i] for i in drawn.tolist()]  # one sync per epoch
    starts = range(0, n - batch_size + 1, batch_size)
    parts = [order[start : start + batch_size][keep] for start in starts]
    for (raw, labels), side in zip(bundle.batches("train", parts), sides, strict=True):
        images = augment_batch(
            raw,
            side,
            bundle.mean,
            bundle.std,
            padding,
            hflip,
            generator,
            batch_size,
            keep,
        )
        yield images, labels


def eval_batches(
    bundle: Bundle, config: DataConfig, batch_size: int, split: str = "val", rows: slice = slice(None)
) -> Iterator[Batch]:
    """Batches of `split` ("val", "test" or "train") in order, resized and normalised, no augmentation.
    `rows`: the part of the split to read (a data-parallel worker's block)."""
    if split not in ("val", "test", "train"):
        raise ValueError(f"split must be 'val', 'test' or 'train', got {split!r}")
    first, stop, _ = rows.indices(int(getattr(bundle, f"{split}_labels").numel()))
    parts = [slice(start, min(start + batch_size, stop)) for start in range(first, stop, batch_size)]
    for images, labels in bundle.batches(split, parts):
        yield prepare_batch(images, config.resolution, bundle.mean, bundle.std), labels
