"""`Samples`: one split of a streamed data set as an index (each image's label and where its bytes
are), never the images themselves, and `StreamSource`, what a data set's streaming reader returns.

The index is a few numpy arrays (file names as fixed-width bytes, or tar shard number, offset and
size): about 20-60 bytes an image, no Python object per image. That is what keeps a DataLoader
worker's memory flat: forked workers share the arrays copy-on-write, and reading them touches no
reference count (a Python list of paths would be copied page by page into every worker as it is
read, PyTorch issue 13246). Host memory then grows with the batch, not the set; only the index
grows with the set (ImageNet's 1.28 M file names: about 30 MB).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FolderSamples:
    """Images as files: `folders[label]/names[i]` (an image folder, ImageNet's layout)."""

    folders: tuple[str, ...]  # one class folder per label
    names: np.ndarray  # bytes (N,): file names, UTF-8
    labels: np.ndarray  # int64 (N,)

    def __len__(self) -> int:
        return len(self.labels)

    def name(self, i: int) -> str:
        return os.path.join(self.folders[self.labels[i]], self.names[i].decode("utf-8"))

    def read(self, i: int) -> bytes:
        with open(self.name(i), "rb") as handle:
            return handle.read()

    def take(self, rows: np.ndarray) -> FolderSamples:
        return dataclasses.replace(self, names=self.names[rows], labels=self.labels[rows])


@dataclass(frozen=True)
class ShardSamples:
    """Images as members of uncompressed tar files: bytes `size[i]` at `offset[i]` of `shards[shard[i]]`."""

    shards: tuple[str, ...]
    shard: np.ndarray  # int32 (N,)
    offset: np.ndarray  # int64 (N,): where the member's data begin
    size: np.ndarray  # int64 (N,)
    labels: np.ndarray  # int64 (N,)

    def __len__(self) -> int:
        return len(self.labels)

    def name(self, i: int) -> str:
        return f"{self.shards[self.shard[i]]} (the member at byte {int(self.offset[i])})"

    def read(self, i: int) -> bytes:
        with open(self.shards[self.shard[i]], "rb") as handle:
            return os.pread(handle.fileno(), int(self.size[i]), int(self.offset[i]))

    def take(self, rows: np.ndarray) -> ShardSamples:
        return dataclasses.replace(
            self,
            shard=self.shard[rows],
            offset=self.offset[rows],
            size=self.size[rows],
            labels=self.labels[rows],
        )


Samples = FolderSamples | ShardSamples


@dataclass(frozen=True)
class StreamSource:
    """A streamed set's training and test splits (the official test split, or a fixed hold-out:
    as `Source`), its classes and its augmentation defaults; validation is held out of train by
    `vitscale.data.stream_bundle.load_stream`, seeded and stratified, as `load` does in memory."""

    train: Samples
    test: Samples
    class_names: list[str]
    hflip: bool
    crop_padding: int
