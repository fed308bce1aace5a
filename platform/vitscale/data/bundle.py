"""`DataBundle` and `load`: one trial's data as uint8 tensors on its device (`data.loader: memory`;
`load` hands a streamed set to `stream_bundle`).

Three splits, everywhere: `train` (what the optimiser sees), `val` (a seeded, stratified
hold-out of the training split: everything that selects — early stopping, samplers, "best" —
reads it) and `test` (the official test split, or the data set's fixed hold-out: evaluated once
at the end of a finished trial and only reported).

The images stay raw (uint8, source resolution) so a CIFAR-sized set fits on any GPU;
`vitscale.data.augment` turns each batch into normalised float32 at the trial resolution.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

import torch

from vitscale.data.config import DataConfig
from vitscale.data.registry import DATASETS, LOADERS
from vitscale.data.source import Source
from vitscale.data.splits import balanced_subset, stratified_split
from vitscale.errors import DataError


@dataclass
class DataBundle:
    train_images: torch.Tensor  # uint8 (N, C, H, W) on the trial's device
    train_labels: torch.Tensor  # int64 (N,) on the same device
    val_images: torch.Tensor
    val_labels: torch.Tensor
    test_images: torch.Tensor
    test_labels: torch.Tensor
    num_classes: int
    in_chans: int
    class_names: list[str]
    mean: tuple[float, ...]  # per channel, on the [0, 1] scale, of the full training split
    std: tuple[float, ...]
    hflip: bool  # the data set's default: does a horizontal flip keep the class?
    crop_padding: int  # the data set's default random-crop padding, in source pixels
    source: str  # registered data set name

    @property
    def device(self) -> torch.device:
        return self.train_images.device

    @property
    def index_device(self) -> torch.device:
        """Where `batches` wants its index tensors: the images' device (a gather there)."""
        return self.device

    def batches(
        self, split: str, parts: Iterable[torch.Tensor | slice]
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(uint8 images, labels) of `split` for each part (row indices or a slice), on the device."""
        images, labels = getattr(self, f"{split}_images"), getattr(self, f"{split}_labels")
        for part in parts:
            yield images[part], labels[part]

    @property
    def source_size(self) -> tuple[int, int]:
        """(H, W) of the stored images, before the per-batch resize."""
        return int(self.train_images.shape[2]), int(self.train_images.shape[3])

    def summary(self) -> dict:
        """Plain values for logging and the CLI."""
        return {
            "dataset": self.source,
            "loader": "memory",
            "num_train": int(self.train_images.shape[0]),
            "num_val": int(self.val_images.shape[0]),
            "num_test": int(self.test_images.shape[0]),
            "num_classes": self.num_classes,
            "in_chans": self.in_chans,
            "source_size": list(self.source_size),
            "mean": [round(m, 4) for m in self.mean],
            "std": [round(s, 4) for s in self.std],
            "hflip": self.hflip,
            "crop_padding": self.crop_padding,
            "device": str(self.device),
        }


class ChannelSums:
    """Per-channel sums of a set's pixels on the [0, 1] scale, added chunk by chunk (float64), so
    neither a full float copy of a set nor the whole set need be held: `channel_stats` adds a
    resident set's chunks, a streamed set adds the chunks its workers decode (`stream_bundle`)."""

    def __init__(self, channels: int) -> None:
        self.total = torch.zeros(channels, dtype=torch.float64)
        self.squares = torch.zeros(channels, dtype=torch.float64)
        self.count = 0

    def add(self, images: torch.Tensor) -> None:
        x = images.to(torch.float64).div_(255.0)
        self.total += x.sum(dim=(0, 2, 3)).cpu()
        self.squares += x.square().sum(dim=(0, 2, 3)).cpu()
        self.count += images.shape[0] * images.shape[2] * images.shape[3]

    def mean_std(self) -> tuple[tuple[float, ...], tuple[float, ...]]:
        mean = self.total / max(self.count, 1)
        std = (self.squares / max(self.count, 1) - mean.square()).clamp_min(0).sqrt().clamp_min(1e-3)
        return tuple(mean.tolist()), tuple(std.tolist())


def channel_stats(images: torch.Tensor, chunk: int = 4096) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """Per-channel mean and std on the [0, 1] scale, in chunks so no full float copy is made."""
    sums = ChannelSums(images.shape[1])
    for start in range(0, images.shape[0], chunk):
        sums.add(images[start : start + chunk])
    return sums.mean_std()


def _cap(images: torch.Tensor, labels: torch.Tensor, n: int | None, seed: int):
    if n is None or n >= labels.numel():
        return images, labels
    idx = balanced_subset(labels, n, seed)
    return images[idx], labels[idx]


def refuse_empty_splits(config: DataConfig, n_train: int, n_val: int, n_test: int) -> None:
    """An empty split would be scored as 0 % (or divide by zero) instead of saying why: refuse it."""
    empty = [name for name, n in (("train", n_train), ("val", n_val), ("test", n_test)) if n == 0]
    if not empty:
        return
    where = f"{config.dataset} at {config.root}" if config.root else config.dataset
    splits = " and ".join(empty) + (" splits" if len(empty) > 1 else " split")
    raise DataError(
        f"data: {where} leaves the {splits} empty ({n_train} train, {n_val} val, {n_test} test "
        "images); give each class at least 3 images (2 training images with a test/ folder), or "
        "raise data.val_fraction"
    )


def split_validation(src: Source, config: DataConfig) -> tuple[torch.Tensor, ...]:
    """(train_x, train_y, val_x, val_y): the loader's own val split, else a stratified hold-out of train."""
    if src.val_images is not None:
        return src.train_images, src.train_labels, src.val_images, src.val_labels
    train_idx, val_idx = stratified_split(src.train_labels, config.val_fraction, config.split_seed)
    return (
        src.train_images[train_idx],
        src.train_labels[train_idx],
        src.train_images[val_idx],
        src.train_labels[val_idx],
    )


# A process-wide cache of bundles, set by a reused trial worker (vitscale.tune.worker_cache); None: off.
_cache = None


def set_cache(cache) -> None:
    """Route `load_resident` through `cache.get(config, device, read)` (None: read every time)."""
    global _cache
    _cache = cache


def load(config: DataConfig, device: torch.device | str = "cpu"):
    """The trial's data as `data.loader` holds it: `load_resident` (memory) or, streamed from
    disk, `stream_bundle.load_stream`; `vitscale.data.batches` reads either the same way."""
    return LOADERS[config.loader](config, device)


def load_resident(config: DataConfig, device: torch.device | str = "cpu") -> DataBundle:
    """Read `config.dataset`, hold out validation, apply the num_train/num_val/num_test caps
    (class-balanced, by split_seed), move to `device`. Through the worker's cache when one is set:
    the tensors are then shared between trials and must not be modified in place."""
    if _cache is not None:
        return _cache.get(config, device, read)
    return read(config, device)


def read(config: DataConfig, device: torch.device | str = "cpu") -> DataBundle:
    """`load_resident` without the cache."""
    src: Source = DATASETS[config.dataset](config)
    train_x, train_y, val_x, val_y = split_validation(src, config)
    refuse_empty_splits(config, len(train_y), len(val_y), len(src.test_labels))
    mean, std = channel_stats(train_x)
    train_x, train_y = _cap(train_x, train_y, config.num_train, config.split_seed)
    val_x, val_y = _cap(val_x, val_y, config.num_val, config.split_seed + 1)
    test_x, test_y = _cap(src.test_images, src.test_labels, config.num_test, config.split_seed + 2)
    device = torch.device(device)
    return DataBundle(
        train_images=train_x.contiguous().to(device),
        train_labels=train_y.to(device),
        val_images=val_x.contiguous().to(device),
        val_labels=val_y.to(device),
        test_images=test_x.contiguous().to(device),
        test_labels=test_y.to(device),
        num_classes=len(src.class_names),
        in_chans=int(train_x.shape[1]),
        class_names=list(src.class_names),
        mean=mean,
        std=std,
        hflip=src.hflip,
        crop_padding=src.crop_padding,
        source=config.dataset,
    )
