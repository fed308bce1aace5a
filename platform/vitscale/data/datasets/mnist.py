"""`fashion_mnist`, `mnist`: the four official IDX files (gzip-compressed or not) from a local folder.

`data.root` is the folder holding `train-images-idx3-ubyte[.gz]`, `train-labels-idx1-ubyte[.gz]`,
`t10k-images-idx3-ubyte[.gz]` and `t10k-labels-idx1-ubyte[.gz]`, or a folder holding that folder
(as `fashion-mnist/`, or torchvision's `FashionMNIST/raw/`). Unset, the first of
`$VITSCALE_DATA/<folder>`, `~/data/<folder>` and `/usr/share/datasets/<folder>` that holds any of
the files is read (Debian's package `dataset-fashion-mnist` installs the last). `download: true`
fetches missing files from the official mirror, the only way this file touches the network.
Test is the official t10k split; `vitscale.data.load` holds validation out of train.

Fashion-MNIST's recommended recipe (batch 64, lr 2e-3, warmup 0.1 epoch, no label smoothing) is
declared in `vitscale.data.datasets`, where it was measured; MNIST keeps the generic one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.datasets.idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx
from vitscale.data.download import fetch
from vitscale.data.source import Source
from vitscale.errors import DataError, UserError

TRAIN_IMAGES, TRAIN_LABELS = "train-images-idx3-ubyte", "train-labels-idx1-ubyte"
TEST_IMAGES, TEST_LABELS = "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"
FILES = (TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS)
SIDE = 28
SYSTEM_DATASETS = Path("/usr/share/datasets")  # where Debian's dataset-* packages install


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    folder: str  # its folder under $VITSCALE_DATA, ~/data and /usr/share/datasets
    torchvision_folder: str  # torchvision's download layout: <root>/<this>/raw/
    url: str  # the official mirror; file names are appended
    md5: tuple[str, ...]  # of the official .gz files, in the order of FILES
    class_names: tuple[str, ...]
    hflip: bool
    crop_padding: int  # the random-crop padding it trains with unless data.crop_padding says otherwise
    package: str | None  # the Debian package that installs it under /usr/share/datasets/<folder>

    def places(self) -> list[Path]:
        """The folders read when data.root is unset, in search order."""
        env = os.environ.get("VITSCALE_DATA")
        places = [Path(env).expanduser() / self.folder] if env else []
        return [*places, Path.home() / "data" / self.folder, SYSTEM_DATASETS / self.folder]

    def ways_to_get(self, folder: str, root_set: bool) -> str:
        """How to get the files, for the message that says they are absent."""
        unset = " and leave data.root unset" if root_set else ""
        apt = f"install them with `apt-get install {self.package}`{unset}, or " if self.package else ""
        files = ", ".join(f"{f}.gz" for f in FILES)
        return (
            f"{apt}put the four official files ({files}, from {self.url}) in {folder}, "
            "or set download: true where a network allows"
        )

    def fix(self, *paths: Path) -> str:
        """How to replace damaged files."""
        if self.package and all(p.is_relative_to(SYSTEM_DATASETS) for p in paths):
            return f"reinstall it: apt-get install --reinstall {self.package}"
        official = " and ".join(p.name if p.name.endswith(".gz") else f"{p.name}.gz" for p in paths)
        it = "it" if len(paths) == 1 else "them"
        return (
            f"replace {it} with the official {official} from {self.url} "
            f"(or delete {it} and set download: true)"
        )


FASHION_MNIST = Variant(
    "fashion_mnist", "Fashion-MNIST", "fashion-mnist", "FashionMNIST",
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
    ("8d4fb7e6c68d591d4c3dfef9ec88bf0d", "25c81989df183df01b3e8a0aad5dffbe",
     "bef4ecab320f06d8554ea6380940ec79", "bb300cfdad3c16e7a12a480ee83cd310"),
    ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
     "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"),
    hflip=True,  # a mirrored shirt, bag or shoe is the same article
    crop_padding=0,  # see below
    package="dataset-fashion-mnist",
)  # fmt: skip
MNIST = Variant(
    "mnist", "MNIST", "mnist", "MNIST",
    "https://ossci-datasets.s3.amazonaws.com/mnist/",
    ("f68b3c2dcbeaaa9fbdd348bbdeb94873", "d53e105ee54ea40749a09fcbcd1e9432",
     "9fb629c4189551a2d022fa330f9573f3", "ec29112dd5afa0611ce80d1b7f02629c"),
    tuple(str(d) for d in range(10)),
    hflip=False,  # a mirrored 2, 3, 7 or 9 is no digit
    crop_padding=2,  # see below
    package=None,
)  # fmt: skip

# Random crops: MNIST centres each digit in a 20x20 box, so its ~4 px margin keeps a shift of up to
# 2 px (7 % of 28; CIFAR's 4 of 32 is 12 %) whole. Fashion-MNIST articles fill the frame, so every
# pixel of shift cuts an edge off: measured (width-64 ViT, 54,000 images, seed 0), padding 2 cost
# 7-9 points after 1 epoch and still 1 point after 6 of 10 (85.9 vs 86.9 % test), so it trains
# without crops by default (hflip only); `data.crop_padding` turns them on (issue 35).


def _files_in(folder: Path) -> dict[str, Path]:
    """Official file name -> the file (uncompressed preferred, else .gz) for those in `folder`."""
    found = {}
    for name in FILES:
        for path in (folder / name, folder / f"{name}.gz"):
            if path.is_file():
                found[name] = path
                break
    return found


def _fetch_missing(v: Variant, folder: Path, found: dict[str, Path]) -> dict[str, Path]:
    """Download the official .gz of every file not `found` into `folder`."""
    for name, md5 in zip(FILES, v.md5, strict=True):
        if name not in found:
            try:
                found[name] = fetch(v.url + f"{name}.gz", folder / f"{name}.gz", md5, v.name)
            except UserError as exc:  # offline, corrupted download: in a study, a failed trial
                raise DataError(str(exc)) from None
    return found


def _locate(v: Variant, root: str | None, download: bool) -> dict[str, Path]:
    """The four files: from `root` (or a folder of the set's name under it), else the default places."""
    if root is not None:
        base = Path(root).expanduser()
        if base.is_file():
            raise DataError(
                f"{v.name}: data.root {base} is a file; give the folder that holds the four IDX files"
            )
        candidates = [base, base / v.folder, base / v.torchvision_folder / "raw"]
    else:
        candidates = v.places()
    for folder in candidates:
        if found := _files_in(folder):
            break
    else:
        folder, found = candidates[0], {}
    missing = [name for name in FILES if name not in found]
    if missing and download:
        return _fetch_missing(v, folder, found)
    if missing and found:
        raise DataError(
            f"{v.name}: {folder} is incomplete: missing {', '.join(missing)} (.gz or not); "
            + v.ways_to_get(str(folder), root is not None)
        )
    if missing and root is not None:
        others = ", ".join(str(c) for c in candidates[1:])
        raise DataError(
            f"{v.name}: no {v.title} IDX files in {candidates[0]} (nor in {others}); "
            + v.ways_to_get("that folder", True)
        )
    if missing:
        env = "" if os.environ.get("VITSCALE_DATA") else " ($VITSCALE_DATA is unset)"
        raise DataError(
            f"{v.name}: data.root is unset and no {v.title} IDX files are in "
            f"{', '.join(str(c) for c in candidates)}{env}; "
            + v.ways_to_get("a folder given as data.root", False)
        )
    return found


def _split(v: Variant, images_file: Path, labels_file: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 (N, 1, 28, 28), int64 (N,)) of one split; DataError naming the file otherwise."""
    images = read_idx(images_file, IMAGES_MAGIC, what=v.name, fix=v.fix(images_file), side=SIDE)
    labels = read_idx(labels_file, LABELS_MAGIC, what=v.name, fix=v.fix(labels_file))
    if len(labels) != len(images):
        raise DataError(
            f"{v.name}: {labels_file} holds {len(labels)} labels but {images_file} holds {len(images)} "
            f"images; one is damaged or from another set: {v.fix(labels_file, images_file)}"
        )
    outside = np.flatnonzero(labels >= len(v.class_names))
    if outside.size:
        i = int(outside[0])
        raise DataError(
            f"{v.name}: {labels_file}: label {labels[i]} (item {i}) is outside 0..{len(v.class_names) - 1}; "
            + v.fix(labels_file)
        )
    return torch.from_numpy(images).unsqueeze(1), torch.from_numpy(labels.astype(np.int64))


def load_idx(v: Variant, config: DataConfig) -> Source:
    try:
        files = _locate(v, config.root, config.download)
        train_x, train_y = _split(v, files[TRAIN_IMAGES], files[TRAIN_LABELS])
        test_x, test_y = _split(v, files[TEST_IMAGES], files[TEST_LABELS])
    except OSError as exc:  # an unreadable folder (permissions, a name too long, ...)
        where = config.root or ", ".join(str(p) for p in v.places())
        raise DataError(f"{v.name}: cannot read {where} ({' '.join(str(exc).split())})") from None
    return Source(
        train_images=train_x,
        train_labels=train_y,
        test_images=test_x,  # the official t10k split; val is held out of train by load()
        test_labels=test_y,
        class_names=list(v.class_names),
        hflip=v.hflip,
        crop_padding=v.crop_padding,
    )


def load_fashion_mnist(config: DataConfig) -> Source:
    return load_idx(FASHION_MNIST, config)


def load_mnist(config: DataConfig) -> Source:
    return load_idx(MNIST, config)
