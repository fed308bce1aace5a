"""`imagefolder`: users' own images, `root/<class name>/*.png|jpg|jpeg`.

Classes are the visible subfolders, sorted by name; each must hold an image (an empty class folder
is an error naming it, not a silently dropped class). Where `root` holds `train/` and `test/`
folders of that layout (or `train/` and `val/`, ImageNet's: its official validation set is the test
split here), they are the two splits; otherwise a fixed stratified fifth (seed
TEST_SEED, not moved by `split_seed`) is the test set. Every image is centre-cropped to a square
and resized to `source_size` (default: resolution) as `vitscale.data.decode` does it, so the set
can live as one uint8 tensor (`data.loader: memory`) or be streamed from disk batch by batch
(`data.loader: stream`, `vitscale.data.stream_bundle`), both from the same index of files. Modes:
a set whose images are all greyscale stays one channel; one colour image makes the whole set RGB,
its grey images repeated over the three channels. A file that does not decode is an error naming it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.decode import one_line
from vitscale.data.samples import FolderSamples, StreamSource
from vitscale.data.source import Source, resident_source
from vitscale.data.splits import stratified_split
from vitscale.errors import DataError

EXTENSIONS = (".png", ".jpg", ".jpeg")
TEST_FRACTION = 0.2
TEST_SEED = 20_611
_LAYOUT = "class subfolders of .png/.jpg/.jpeg images (root/<class>/<image>)"


def class_folders(root: str | None) -> Iterator[tuple[Path, list[str]]]:
    """(class folder, its image file names sorted) for each class, classes sorted by name;
    DataError where `root` has no such layout.

    Every visible subfolder is a class and must hold an image: an empty one is an error naming
    it (silently dropping it would shift the labels of the classes after it and num_classes).
    Names, not paths: a streamed set keeps millions of them (`vitscale.data.samples`).
    """
    if root is None:
        raise DataError(f"imagefolder: data.root is not set; point it at a directory of {_LAYOUT}")
    path = Path(root).expanduser()
    if not path.is_dir():
        raise DataError(f"imagefolder: {path} is not a directory; expected {_LAYOUT}")
    empty, count = [], 0
    try:
        for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            with os.scandir(folder) as entries:
                names = sorted(e.name for e in entries if _is_image(e.name) and e.is_file())
            if not names:
                empty.append(str(folder))
            count += 1
            yield folder, names
    except OSError as exc:  # an unreadable folder
        raise DataError(f"imagefolder: cannot list {path} ({one_line(exc)})") from None
    if empty:
        raise DataError(
            f"imagefolder: class folder(s) without a .png/.jpg/.jpeg image: {', '.join(empty)}; "
            "add images or remove the folder (or rename it to start with '.')"
        )
    if count < 2:
        raise DataError(
            f"imagefolder: {path} holds {count} class folder(s) with images; expected >= 2 {_LAYOUT}"
        )


def _is_image(name: str) -> bool:
    return os.path.splitext(name)[1].lower() in EXTENSIONS


def split_folders(root: str | None) -> tuple[Path, Path] | None:
    """(train/, test/) where `root` holds both, else (train/, val/) (ImageNet's layout: its
    official validation set is vitscale's test split), else None (one folder of classes)."""
    path = Path(root).expanduser() if root is not None else None
    if path is None or not (path / "train").is_dir():
        return None
    for test in ("test", "val"):
        if (path / test).is_dir():
            return path / "train", path / test
    return None


def folder_samples(root: str | Path | None) -> tuple[list[str], FolderSamples]:
    """(class names, the index of every image under `root`): classes sorted, files sorted in each."""
    classes, folders, names, labels = [], [], [], []
    for folder, files in class_folders(None if root is None else str(root)):
        names.append(np.array([name.encode("utf-8") for name in files], dtype=np.bytes_))
        labels.append(np.full(len(files), len(classes), dtype=np.int64))
        classes.append(folder.name)
        folders.append(str(folder))
    return classes, FolderSamples(tuple(folders), np.concatenate(names), np.concatenate(labels))


def index_imagefolder(config: DataConfig) -> StreamSource:
    """The set's index (`data.loader: stream`): train/ and test/ (or val/) folders, or one folder
    with a fixed stratified test hold-out; flips and crops on."""
    size = config.source_size or config.resolution
    folders = split_folders(config.root)
    if folders is not None:
        classes, train = folder_samples(folders[0])
        test_classes, test = folder_samples(folders[1])
        if test_classes != classes:
            raise DataError(
                f"imagefolder: {folders[1]} has classes {test_classes}, {folders[0]} has {classes}; "
                f"{folders[0].name}/ and {folders[1].name}/ need the same class folders"
            )
    else:
        classes, everything = folder_samples(config.root)
        train_idx, test_idx = stratified_split(torch.from_numpy(everything.labels), TEST_FRACTION, TEST_SEED)
        train, test = everything.take(train_idx.numpy()), everything.take(test_idx.numpy())
    return StreamSource(train, test, classes, hflip=True, crop_padding=size // 8)


def load_imagefolder(config: DataConfig) -> Source:
    """The whole set decoded into memory (`data.loader: memory`)."""
    return resident_source(index_imagefolder(config), config.source_size or config.resolution, "imagefolder")
