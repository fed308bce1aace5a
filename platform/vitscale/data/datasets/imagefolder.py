"""`imagefolder`: users' own images, `root/<class name>/*.png|jpg|jpeg`.

Classes are the subfolders that hold images, sorted by name. Where `root` holds `train/`
and `test/` folders of that layout, they are the two splits; otherwise a fixed stratified
fifth (seed TEST_SEED, not moved by `split_seed`) is the test set. Every image is centre-cropped
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
TEST_FRACTION = 0.2
TEST_SEED = 20_611
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


def _stack(files: list[tuple[Path, int]], size: int, grey: bool) -> tuple[torch.Tensor, torch.Tensor]:
    images = torch.from_numpy(np.stack([_read(f, size, grey) for f, _ in files]))
    return images, torch.tensor([label for _, label in files], dtype=torch.int64)


def _split_folders(root: str | None) -> tuple[Path, Path] | None:
    path = Path(root).expanduser() if root is not None else None
    if path is not None and (path / "train").is_dir() and (path / "test").is_dir():
        return path / "train", path / "test"
    return None


@register_dataset("imagefolder")
def load_imagefolder(config: DataConfig) -> Source:
    """train/ and test/ folders, or one folder with a fixed test hold-out; flips and crops on."""
    size = config.source_size or config.resolution
    folders = _split_folders(config.root)
    if folders is not None:
        classes, train_files = scan(str(folders[0]))
        test_classes, test_files = scan(str(folders[1]))
        if test_classes != classes:
            raise UserError(
                f"imagefolder: {folders[1]} has classes {test_classes}, {folders[0]} has {classes}; "
                "train/ and test/ need the same class folders"
            )
        grey = _all_grey(train_files + test_files)
        train_x, train_y = _stack(train_files, size, grey)
        test_x, test_y = _stack(test_files, size, grey)
    else:
        classes, files = scan(config.root)
        images, labels = _stack(files, size, _all_grey(files))
        train_idx, test_idx = stratified_split(labels, TEST_FRACTION, TEST_SEED)
        train_x, train_y, test_x, test_y = (
            images[train_idx],
            labels[train_idx],
            images[test_idx],
            labels[test_idx],
        )
    return Source(
        train_images=train_x,
        train_labels=train_y,
        test_images=test_x,
        test_labels=test_y,
        class_names=classes,
        hflip=True,
        crop_padding=size // 8,
    )
