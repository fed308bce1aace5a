"""`StreamBundle` and `load_stream`: a data set read from disk batch by batch (`data.loader: stream`).

For sets larger than memory. The trial holds the set's index (`samples`: labels and where each
image's bytes are), never its images: `torch.utils.data.DataLoader` workers (`data.num_workers`,
processes) read and decode the rows of each batch on the CPU (`decode`, as the in-memory path
decodes them), a few batches ahead, and the trainer augments them on its device as it does a
resident set (`batches`, `augment`). The rows of each batch, the shuffle and every augmentation
draw come from the trial's generator in the trainer's process, so a seed gives the batches the
in-memory loader gives, and a data-parallel worker reads only its own rows of each global batch.

Host memory: the index (tens of bytes an image), `num_workers x PREFETCH` decoded batches in
flight, and, once at load, the per-channel sums of the statistics' sample, one chunk of at most
STATS_CHUNK_BYTES of decoded images at a time. Nothing of it grows with the set but the index.

What it estimates instead of reading the whole set: the per-channel mean and std of the training
split come from a seeded sample of STATS_IMAGES images, all of them where the split is that small
(the in-memory path's figures then, to the bit where they fit one chunk); whether the set is grey
(one channel) or colour is read from the modes of that sample's file headers.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from torch.utils.data import DataLoader, Dataset

from vitscale.data.bundle import ChannelSums, refuse_empty_splits
from vitscale.data.config import DataConfig
from vitscale.data.decode import GREY_MODES, decode_sample, one_line
from vitscale.data.registry import DATASETS
from vitscale.data.samples import Samples, StreamSource
from vitscale.data.splits import balanced_subset, stratified_split
from vitscale.errors import DataError

PREFETCH = 2  # batches each DataLoader worker decodes ahead
STATS_IMAGES = 2048  # training images the per-channel statistics are estimated from
STATS_CHUNK = 4096  # images summed at once, as `channel_stats` sums a resident set,
STATS_CHUNK_BYTES = 4 * 2**20  # unless they take more than this decoded (x 16 as float64 sums)
HEADER_BATCH = 256


@dataclass(frozen=True)
class ReadFailure:
    """A worker's DataError, carried back as data: re-raised in the trainer as its one line (the
    DataLoader would re-raise it with the worker's traceback folded into the message)."""

    message: str


class DecodedImages(Dataset):
    """Row -> uint8 (C, S, S) tensor of one split: what each DataLoader worker runs."""

    def __init__(self, samples: Samples, size: int, mode: str, what: str) -> None:
        self.samples, self.size, self.mode, self.what = samples, size, mode, what

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, row: int) -> torch.Tensor | ReadFailure:
        try:
            array = decode_sample(self.samples, row, self.size, self.what, self.mode)
        except DataError as exc:
            return ReadFailure(str(exc))
        return torch.from_numpy(array[None] if array.ndim == 2 else array.transpose(2, 0, 1).copy())


class HeaderModes(Dataset):
    """Row -> 1 where the image's mode (read from its header, not decoded) is greyscale, else 0."""

    def __init__(self, samples: Samples, what: str) -> None:
        self.samples, self.what = samples, what

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, row: int) -> torch.Tensor | ReadFailure:
        name = self.samples.name(row)
        try:
            with Image.open(io.BytesIO(self.samples.read(row))) as img:
                return torch.tensor(int(img.mode in GREY_MODES))
        except Exception as exc:  # as decode_image: every failure names the file
            return ReadFailure(f"{self.what}: cannot read image {name} ({one_line(exc)})")


def stack(items: list) -> torch.Tensor | ReadFailure:
    """A batch of one worker: the stacked tensors, or the first failure among them."""
    failed = next((item for item in items if isinstance(item, ReadFailure)), None)
    return failed if failed is not None else torch.stack(items)


def _rows(part: torch.Tensor | slice, n: int) -> list[int]:
    return list(range(*part.indices(n))) if isinstance(part, slice) else part.tolist()


def read_ahead(
    dataset: Dataset, parts: Iterable[list[int]], workers: int, pin: bool
) -> Iterator[torch.Tensor]:
    """Batches of `dataset`'s rows, `parts` in order, read by `workers` processes ahead of use
    (0: in this process); a batch that could not be read raises its DataError here."""
    loader = DataLoader(
        dataset,
        batch_sampler=list(parts),
        num_workers=workers,
        collate_fn=stack,
        pin_memory=pin,
        prefetch_factor=PREFETCH if workers else None,
        # Its own generator: the workers' base seed (unused: decoding draws nothing) would otherwise
        # be drawn from the global RNG, moving model initialisation and dropout off the seed's.
        generator=torch.Generator(),
    )
    for batch in loader:
        if isinstance(batch, ReadFailure):
            raise DataError(batch.message)
        yield batch


@dataclass
class StreamBundle:
    """A streamed set as the trainer reads it: labels on the device, images read when asked for."""

    train_samples: Samples
    val_samples: Samples
    test_samples: Samples
    train_labels: torch.Tensor  # int64 (N,) on the trial's device
    val_labels: torch.Tensor
    test_labels: torch.Tensor
    num_classes: int
    in_chans: int
    class_names: list[str]
    mean: tuple[float, ...]  # per channel, on the [0, 1] scale, of the training split (see above)
    std: tuple[float, ...]
    hflip: bool
    crop_padding: int
    source: str
    size: int  # side of the decoded images
    num_workers: int

    @property
    def device(self) -> torch.device:
        return self.train_labels.device

    @property
    def index_device(self) -> torch.device:
        """Where `batches` wants its index tensors: the CPU, which hands the rows to the workers."""
        return torch.device("cpu")

    @property
    def source_size(self) -> tuple[int, int]:
        return self.size, self.size

    def batches(
        self, split: str, parts: Iterable[torch.Tensor | slice]
    ) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """(uint8 images, labels) of `split` for each part (row indices or a slice), on the device;
        the DataLoader's workers read and decode them ahead, in order."""
        samples, labels = getattr(self, f"{split}_samples"), getattr(self, f"{split}_labels")
        parts = list(parts)
        rows = [_rows(part, len(samples)) for part in parts]
        images = DecodedImages(samples, self.size, "L" if self.in_chans == 1 else "RGB", self.source)
        cuda = self.device.type == "cuda"
        for part, batch in zip(parts, read_ahead(images, rows, self.num_workers, cuda), strict=True):
            index = part.to(self.device) if isinstance(part, torch.Tensor) else part
            yield batch.to(self.device, non_blocking=True), labels[index]

    def summary(self) -> dict:
        """Plain values for logging and the CLI (as `DataBundle.summary`)."""
        return {
            "dataset": self.source,
            "loader": "stream",
            "num_workers": self.num_workers,
            "num_train": len(self.train_samples),
            "num_val": len(self.val_samples),
            "num_test": len(self.test_samples),
            "num_classes": self.num_classes,
            "in_chans": self.in_chans,
            "source_size": list(self.source_size),
            "mean": [round(m, 4) for m in self.mean],
            "std": [round(s, 4) for s in self.std],
            "hflip": self.hflip,
            "crop_padding": self.crop_padding,
            "device": str(self.device),
        }


def _cap(samples: Samples, n: int | None, seed: int) -> Samples:
    if n is None or n >= len(samples):
        return samples
    return samples.take(balanced_subset(torch.from_numpy(samples.labels), n, seed).numpy())


def stats_rows(n: int, seed: int) -> list[int]:
    """The training rows the statistics are read from: all where there are at most STATS_IMAGES,
    else a seeded sample of that many, in row order."""
    if n <= STATS_IMAGES:
        return list(range(n))
    return (
        torch.randperm(n, generator=torch.Generator().manual_seed(seed))[:STATS_IMAGES].sort().values.tolist()
    )


def _chunks(rows: list[int], chunk: int) -> list[list[int]]:
    return [rows[i : i + chunk] for i in range(0, len(rows), chunk)]


def all_grey(splits: Iterable[Samples], seed: int, workers: int, what: str) -> bool:
    """Whether every image of `stats_rows` of each split is greyscale (the in-memory path's rule
    for one channel, on the sample; on every image where the splits are that small)."""
    for samples in splits:
        chunks = _chunks(stats_rows(len(samples), seed), HEADER_BATCH)
        if not all(
            bool(flags.all()) for flags in read_ahead(HeaderModes(samples, what), chunks, workers, False)
        ):
            return False
    return True


def sampled_stats(
    samples: Samples, size: int, grey: bool, seed: int, workers: int, what: str
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(mean, std) per channel of the training split's `stats_rows`, summed chunk by chunk as
    `channel_stats` sums a resident split (the same figures where the sample is the split and
    fits one chunk)."""
    channels = 1 if grey else 3
    chunk = max(1, min(STATS_CHUNK, STATS_CHUNK_BYTES // (channels * size * size)))
    images = DecodedImages(samples, size, "L" if grey else "RGB", what)
    sums = ChannelSums(channels)
    for batch in read_ahead(images, _chunks(stats_rows(len(samples), seed), chunk), workers, False):
        sums.add(batch)
    return sums.mean_std()


def stream_reader(dataset: str) -> Callable[[DataConfig], StreamSource]:
    """The data set's declared reader of its index ("module:function", imported now)."""
    module, _, function = DATASETS.fact(dataset, "stream").partition(":")
    return getattr(importlib.import_module(module), function)


def load_stream(config: DataConfig, device: torch.device | str = "cpu") -> StreamBundle:
    """The set's index, split and capped as `load_resident` splits and caps it (the same rows for a
    seed), its statistics estimated (see above), its labels on `device`."""
    src: StreamSource = stream_reader(config.dataset)(config)
    size = config.source_size or config.resolution
    train_idx, val_idx = stratified_split(
        torch.from_numpy(src.train.labels), config.val_fraction, config.split_seed
    )
    train, val = src.train.take(train_idx.numpy()), src.train.take(val_idx.numpy())
    refuse_empty_splits(config, len(train), len(val), len(src.test))
    what, workers = config.dataset, config.num_workers
    grey = all_grey((src.train, src.test), config.split_seed, workers, what)
    mean, std = sampled_stats(train, size, grey, config.split_seed, workers, what)
    train = _cap(train, config.num_train, config.split_seed)
    val = _cap(val, config.num_val, config.split_seed + 1)
    test = _cap(src.test, config.num_test, config.split_seed + 2)
    device = torch.device(device)

    def labels(samples: Samples) -> torch.Tensor:
        return torch.from_numpy(samples.labels.astype(np.int64)).to(device)

    return StreamBundle(
        train_samples=train,
        val_samples=val,
        test_samples=test,
        train_labels=labels(train),
        val_labels=labels(val),
        test_labels=labels(test),
        num_classes=len(src.class_names),
        in_chans=1 if grey else 3,
        class_names=list(src.class_names),
        mean=mean,
        std=std,
        hflip=src.hflip,
        crop_padding=src.crop_padding,
        source=config.dataset,
        size=size,
        num_workers=config.num_workers,
    )
