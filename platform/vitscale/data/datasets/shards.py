"""`shards`: images in tar shards, WebDataset's layout: `shard-000000.tar` holding `<key>.jpg`
(or .jpeg, .png) and `<key>.cls` (the class number, ASCII) per sample.

Where `root` holds `train/` and `test/` (or `val/`) folders of shards, they are the two splits;
otherwise the shards in `root` are one set and a fixed stratified fifth (seed TEST_SEED) is the
test set. Class names: the lines of `root/classes.txt` where it exists (line i names class i),
else the class numbers. Shards are read in name order, samples in their order inside a shard.

The shards are indexed once (Python's tarfile reads the 512-byte member headers and seeks past the
data), so each image is then read by offset (`samples.ShardSamples`): both loaders work, with the
epoch shuffled over the whole set and the same seeded splits as every other set, where
WebDataset's own reader streams shards in sequence through a shuffle buffer. The `webdataset`
library is not used: nothing of it is needed beyond the tar format, which the standard library
reads. Shards must be uncompressed tar (a compressed one cannot be read by offset).
"""

from __future__ import annotations

import tarfile
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.datasets.imagefolder import TEST_FRACTION, TEST_SEED
from vitscale.data.decode import one_line
from vitscale.data.samples import ShardSamples, StreamSource
from vitscale.data.source import Source, resident_source
from vitscale.data.splits import stratified_split
from vitscale.errors import DataError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
LABEL_SUFFIX = ".cls"
CLASSES_FILE = "classes.txt"
_LAYOUT = "tar shards of <key>.jpg + <key>.cls samples (root/*.tar, or root/train/*.tar and root/test/*.tar)"


def _key_and_suffix(member: str) -> tuple[str, str]:
    """WebDataset's split of a member name: the key is all up to the first dot of the file name."""
    folder, _, name = member.rpartition("/")
    stem, dot, rest = name.partition(".")
    return (f"{folder}/{stem}" if folder else stem), (dot + rest).lower()


def _index_shard(path: Path) -> tuple[list[int], list[int], list[int]]:
    """(offsets, sizes, labels) of the samples of one shard, in member order."""
    images: dict[str, tuple[int, int]] = {}
    labels: dict[str, int] = {}
    try:
        with tarfile.open(path, mode="r:") as tar:
            while (member := tar.next()) is not None:
                tar.members.clear()  # the index keeps three numbers a sample, not tarfile's objects
                if not member.isfile():
                    continue
                key, suffix = _key_and_suffix(member.name)
                if suffix in IMAGE_SUFFIXES:
                    images[key] = (member.offset_data, member.size)
                elif suffix == LABEL_SUFFIX:
                    text = tar.extractfile(member).read().decode("ascii", "replace").strip()
                    if not text.isdigit():
                        raise DataError(
                            f"shards: {path} member {member.name} holds {text[:20]!r}, not a class number"
                        )
                    labels[key] = int(text)
    except (tarfile.TarError, OSError) as exc:
        raise DataError(f"shards: cannot read {path} as an uncompressed tar ({one_line(exc)})") from None
    unlabelled = sorted(set(images) - set(labels))
    if unlabelled:
        raise DataError(
            f"shards: {path} has no {LABEL_SUFFIX} for sample {unlabelled[0]!r} ({len(unlabelled)} in all)"
        )
    keys = list(images)
    return [images[k][0] for k in keys], [images[k][1] for k in keys], [labels[k] for k in keys]


def shard_samples(folder: Path) -> ShardSamples:
    """The index of every sample of the shards in `folder`."""
    if not folder.is_dir():
        raise DataError(f"shards: {folder} is not a directory; expected {_LAYOUT}")
    paths = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".tar")
    if not paths:
        raise DataError(f"shards: {folder} holds no .tar file; expected {_LAYOUT}")
    shard, offset, size, labels = [], [], [], []
    for number, path in enumerate(paths):
        offsets, sizes, classes = _index_shard(path)
        shard.append(np.full(len(offsets), number, dtype=np.int32))
        offset.append(np.asarray(offsets, dtype=np.int64))
        size.append(np.asarray(sizes, dtype=np.int64))
        labels.append(np.asarray(classes, dtype=np.int64))
    return ShardSamples(
        tuple(str(p) for p in paths),
        np.concatenate(shard),
        np.concatenate(offset),
        np.concatenate(size),
        np.concatenate(labels),
    )


def _class_names(root: Path, labels: np.ndarray) -> list[str]:
    """`root/classes.txt`'s lines, else "0" .. "K-1" for the highest class number K-1 seen."""
    listed = root / CLASSES_FILE
    if listed.is_file():
        names = [line.strip() for line in listed.read_text(encoding="utf-8").splitlines() if line.strip()]
    else:
        names = [str(c) for c in range(int(labels.max()) + 1 if len(labels) else 0)]
    if len(labels) and int(labels.max()) >= len(names):
        raise DataError(
            f"shards: class {int(labels.max())} in the shards, but {listed} names {len(names)} classes"
        )
    if len(names) < 2:
        raise DataError(f"shards: {root} holds {len(names)} class(es); expected >= 2")
    return names


def index_shards(config: DataConfig) -> StreamSource:
    """The set's index (`data.loader: stream`); flips and crops on."""
    if config.root is None:
        raise DataError(f"shards: data.root is not set; point it at a directory of {_LAYOUT}")
    root = Path(config.root).expanduser()
    if not root.is_dir():
        raise DataError(f"shards: {root} is not a directory; expected {_LAYOUT}")
    test_folder = next((root / n for n in ("test", "val") if (root / n).is_dir()), None)
    if (root / "train").is_dir() and test_folder is not None:
        train, test = shard_samples(root / "train"), shard_samples(test_folder)
    else:
        everything = shard_samples(root)
        train_idx, test_idx = stratified_split(torch.from_numpy(everything.labels), TEST_FRACTION, TEST_SEED)
        train, test = everything.take(train_idx.numpy()), everything.take(test_idx.numpy())
    classes = _class_names(root, np.concatenate([train.labels, test.labels]))
    size = config.source_size or config.resolution
    return StreamSource(train, test, classes, hflip=True, crop_padding=size // 8)


def load_shards(config: DataConfig) -> Source:
    """The whole set decoded into memory (`data.loader: memory`)."""
    return resident_source(index_shards(config), config.source_size or config.resolution, "shards")
