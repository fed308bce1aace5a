"""Generated JPEG data sets in the on-disk formats the streaming loader reads, for its tests and
its measurement (`vitscale data generate`): an ImageNet-layout folder or WebDataset-style tar shards.

Each class is a fixed pattern (a colour and a stripe orientation and frequency) under per-image
shifts and noise, so a model can learn the set and a throughput figure is one of a set that trains;
every image is a separate JPEG as in ImageNet, with a few greyscale ones among the colour ones as
there. Deterministic for a seed.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
from PIL import Image

from vitscale.errors import make_folder

SPLITS = ("train", "val")  # ImageNet's names; vitscale reads val/ as the test split
PER_SHARD = 1000
GREY_EVERY = 50  # one image in this many is stored greyscale


def _templates(classes: int, size: int, seed: int) -> np.ndarray:
    """(classes, 2 * size, 2 * size, 3) float32 patterns, twice the side so a shift stays inside."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0 : 2 * size, 0 : 2 * size].astype(np.float32)
    out = np.empty((classes, 2 * size, 2 * size, 3), dtype=np.float32)
    for c in range(classes):
        angle = np.pi * c / classes
        frequency = 2 * np.pi * (2 + c % 3) / size
        wave = np.sin(frequency * (x * np.cos(angle) + y * np.sin(angle)))
        colour = rng.uniform(60, 200, size=3).astype(np.float32)
        out[c] = colour + 50 * wave[..., None]
    return out


def _images(n: int, classes: int, size: int, seed: int) -> Iterator[tuple[int, int, bytes]]:
    """(index, label, JPEG bytes) of n images, classes in turn."""
    templates = _templates(classes, size, 0)  # the classes are the same patterns in every split
    rng = np.random.default_rng(seed)
    for i in range(n):
        label = i % classes
        dy, dx = rng.integers(0, size, 2)
        pixels = templates[label, dy : dy + size, dx : dx + size] + rng.normal(0, 20, (size, size, 3))
        image = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        if i % GREY_EVERY == GREY_EVERY - 1:
            image = image.convert("L")
        buffer = io.BytesIO()
        image.save(buffer, format="JPEG", quality=90)
        yield i, label, buffer.getvalue()


def write_folder(folder: Path, n: int, classes: int, size: int, seed: int) -> None:
    """`folder/<class>/<index>.JPEG`, class folders named c000, c001, ..."""
    for c in range(classes):
        (folder / f"c{c:03d}").mkdir(parents=True, exist_ok=True)
    for i, label, data in _images(n, classes, size, seed):
        (folder / f"c{label:03d}" / f"{i:08d}.JPEG").write_bytes(data)


def write_shards(folder: Path, n: int, classes: int, size: int, seed: int) -> None:
    """`folder/shard-000000.tar`, ... of PER_SHARD samples: `<index>.jpg` and `<index>.cls`."""
    folder.mkdir(parents=True, exist_ok=True)
    tar = None
    try:
        for i, label, data in _images(n, classes, size, seed):
            if i % PER_SHARD == 0:
                if tar is not None:
                    tar.close()
                tar = tarfile.open(
                    folder / f"shard-{i // PER_SHARD:06d}.tar", mode="w", format=tarfile.USTAR_FORMAT
                )
            for name, payload in ((f"{i:08d}.jpg", data), (f"{i:08d}.cls", str(label).encode())):
                info = tarfile.TarInfo(name)
                info.size = len(payload)
                tar.addfile(info, io.BytesIO(payload))
    finally:
        if tar is not None:
            tar.close()


# layout name -> writer of one split's folder
LAYOUTS: dict[str, Callable[[Path, int, int, int, int], None]] = {
    "folder": write_folder,
    "shards": write_shards,
}


def generate(root: Path, layout: str, train: int, test: int, classes: int = 10, size: int = 64) -> Path:
    """`root/train/` and `root/val/` of `layout` with `train` and `test` images (data set
    `imagefolder` or `shards` with `data.root: root`)."""
    make_folder(root, "--root")
    for split, n, seed in ((SPLITS[0], train, 1), (SPLITS[1], test, 2)):
        LAYOUTS[layout](root / split, n, classes, size, seed)
    return root
