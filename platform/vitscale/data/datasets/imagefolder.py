"""`imagefolder`: users' own images, `root/<class name>/*.png|jpg|jpeg`.

Classes are the subfolders that hold images, sorted by name. Every image is centre-cropped
to a square and resized (PIL bilinear, antialiased) to `source_size` (default: resolution),
so the set can live as one uint8 tensor; greyscale sets stay one channel.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.registry import register_dataset
from vitscale.data.source import Source
from vitscale.data.splits import stratified_split
from vitscale.errors import UserError

EXTENSIONS = (".png", ".jpg", ".jpeg")
_LAYOUT = "class subfolders of .png/.jpg/.jpeg images (root/<class>/<image>)"


def scan(root: str | None) -> tuple[list[str], list[tuple[Path, int]]]:
    """(class names, [(file, label)]) of an image folder; UserError if there is no such layout."""
    if root is None:
        raise UserError(f"imagefolder: data.root is not set; point it at a directory of {_LAYOUT}")
    path = Path(root).expanduser()
    if not path.is_dir():
        raise UserError(f"imagefolder: {path} is not a directory; expected {_LAYOUT}")
    classes, files = [], []
    for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
        images = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in EXTENSIONS)
        if images:
            files.extend((f, len(classes)) for f in images)
            classes.append(folder.name)
    if len(classes) < 2:
        raise UserError(
            f"imagefolder: {path} holds {len(classes)} class folder(s) with images; expected >= 2 {_LAYOUT}"
        )
    return classes, files


def _read(file: Path, size: int, grey: bool) -> np.ndarray:
    from PIL import Image, ImageOps, UnidentifiedImageError

    try:
        with Image.open(file) as img:
            img = img.convert("L" if grey else "RGB")
            img = ImageOps.fit(img, (size, size), method=Image.Resampling.BILINEAR)
            array = np.asarray(img, dtype=np.uint8)
    except (UnidentifiedImageError, OSError) as exc:
        raise UserError(f"imagefolder: cannot read image {file} ({' '.join(str(exc).split())})") from None
    return array[None] if grey else array.transpose(2, 0, 1)


def _all_grey(files: list[tuple[Path, int]]) -> bool:
    from PIL import Image

    def mode(file: Path) -> str:
        try:
            with Image.open(file) as img:
                return img.mode
        except OSError:
            return "RGB"  # reported properly by _read

    return all(mode(f) in ("1", "L", "I", "I;16") for f, _ in files)


@register_dataset("imagefolder")
def load_imagefolder(config: DataConfig) -> Source:
    """Stratified train/val split by `split_seed`; flips and crops on by default (natural images)."""
    classes, files = scan(config.root)
    size = config.source_size or config.resolution
    grey = _all_grey(files)
    images = torch.from_numpy(np.stack([_read(f, size, grey) for f, _ in files]))
    labels = torch.tensor([label for _, label in files], dtype=torch.int64)
    train_idx, val_idx = stratified_split(labels, config.val_fraction, config.split_seed)
    return Source(
        train_images=images[train_idx],
        train_labels=labels[train_idx],
        val_images=images[val_idx],
        val_labels=labels[val_idx],
        class_names=classes,
        hflip=True,
        crop_padding=size // 8,
    )
