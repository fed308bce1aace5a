"""`imagefolder`: users' own images, `root/<class name>/*.png|jpg|jpeg`.

Classes are the visible subfolders, sorted by name; each must hold an image (an empty class folder
is an error naming it, not a silently dropped class). Where `root` holds `train/` and `test/`
folders of that layout, they are the two splits; otherwise a fixed stratified fifth (seed
TEST_SEED, not moved by `split_seed`) is the test set. Every image is centre-cropped to a square
and resized (PIL bilinear, antialiased) to `source_size` (default: resolution), so the set can
live as one uint8 tensor. Modes: a set whose images are all greyscale (1-bit, 8-bit, grey + alpha,
16-bit) stays one channel; one colour image (RGB, RGBA, palette, CMYK) makes the whole set RGB, its
grey images repeated over the three channels. Alpha is dropped (the colour stored under it is kept,
as torchvision's ImageFolder does); 16-bit images are scaled to 8 bits (value / 257), not clipped.
A file that does not decode is an error naming it.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.source import Source
from vitscale.data.splits import stratified_split
from vitscale.errors import DataError

EXTENSIONS = (".png", ".jpg", ".jpeg")
TEST_FRACTION = 0.2
TEST_SEED = 20_611
# Greyscale modes: 1-bit, 8-bit, 8-bit with alpha, 16/32-bit integer, float. Any other mode is colour.
GREY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F")
_LAYOUT = "class subfolders of .png/.jpg/.jpeg images (root/<class>/<image>)"


def scan(root: str | None) -> tuple[list[str], list[tuple[Path, int]]]:
    """(class names, [(file, label)]) of an image folder; DataError if there is no such layout.

    Every visible subfolder is a class and must hold an image: an empty one is an error naming
    it (silently dropping it would shift the labels of the classes after it and num_classes).
    """
    if root is None:
        raise DataError(f"imagefolder: data.root is not set; point it at a directory of {_LAYOUT}")
    path = Path(root).expanduser()
    if not path.is_dir():
        raise DataError(f"imagefolder: {path} is not a directory; expected {_LAYOUT}")
    classes, files, empty = [], [], []
    try:
        for folder in sorted(p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")):
            images = sorted(f for f in folder.iterdir() if f.is_file() and f.suffix.lower() in EXTENSIONS)
            if not images:
                empty.append(str(folder))
            files.extend((f, len(classes)) for f in images)
            classes.append(folder.name)
    except OSError as exc:  # an unreadable folder
        raise DataError(f"imagefolder: cannot list {path} ({_one_line(exc)})") from None
    if empty:
        raise DataError(
            f"imagefolder: class folder(s) without a .png/.jpg/.jpeg image: {', '.join(empty)}; "
            "add images or remove the folder (or rename it to start with '.')"
        )
    if len(classes) < 2:
        raise DataError(
            f"imagefolder: {path} holds {len(classes)} class folder(s) with images; expected >= 2 {_LAYOUT}"
        )
    return classes, files


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _eight_bit(img):
    """`img` as 8-bit "L" (greyscale modes, alpha dropped) or "RGB" (all other modes, alpha dropped)."""
    from PIL import Image

    if img.mode.startswith("I;16") or img.mode == "I":  # 16-bit grey (PNG): scale, do not clip
        levels = np.clip(np.asarray(img, dtype=np.int64), 0, 65535)
        return Image.fromarray(((levels + 128) // 257).astype(np.uint8), mode="L")
    if img.mode == "F":
        return Image.fromarray((np.clip(np.asarray(img), 0.0, 1.0) * 255).round().astype(np.uint8), mode="L")
    return img.convert("L" if img.mode in GREY_MODES else "RGB")


def _read(file: Path, size: int) -> np.ndarray:
    """One image centre-cropped and resized to (size, size): uint8 (H, W) if grey, else (H, W, 3)."""
    from PIL import Image, ImageOps

    try:
        with warnings.catch_warnings(), Image.open(file) as img:
            warnings.simplefilter("ignore")  # PIL's palette/EXIF notes: the image is read all the same
            img = ImageOps.fit(_eight_bit(img), (size, size), method=Image.Resampling.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except Exception as exc:  # PIL's decoders raise many kinds on damaged files; each names this file
        raise DataError(f"imagefolder: cannot read image {file} ({_one_line(exc)})") from None


def _read_all(files: list[tuple[Path, int]], size: int) -> tuple[list[np.ndarray], torch.Tensor]:
    return [_read(f, size) for f, _ in files], torch.tensor([label for _, label in files], dtype=torch.int64)


def _stack(arrays: list[np.ndarray], grey: bool) -> torch.Tensor:
    """uint8 (N, C, H, W): one channel if the whole set is grey, else grey images repeated to RGB."""
    if grey:
        return torch.from_numpy(np.stack(arrays)[:, None])
    rgb = [np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else a for a in arrays]
    return torch.from_numpy(np.stack(rgb).transpose(0, 3, 1, 2).copy())


def _split_folders(root: str | None) -> tuple[Path, Path] | None:
    path = Path(root).expanduser() if root is not None else None
    if path is not None and (path / "train").is_dir() and (path / "test").is_dir():
        return path / "train", path / "test"
    return None


def load_imagefolder(config: DataConfig) -> Source:
    """train/ and test/ folders, or one folder with a fixed test hold-out; flips and crops on."""
    size = config.source_size or config.resolution
    folders = _split_folders(config.root)
    if folders is not None:
        classes, train_files = scan(str(folders[0]))
        test_classes, test_files = scan(str(folders[1]))
        if test_classes != classes:
            raise DataError(
                f"imagefolder: {folders[1]} has classes {test_classes}, {folders[0]} has {classes}; "
                "train/ and test/ need the same class folders"
            )
        train_arrays, train_y = _read_all(train_files, size)
        test_arrays, test_y = _read_all(test_files, size)
        grey = all(a.ndim == 2 for a in train_arrays + test_arrays)
        train_x, test_x = _stack(train_arrays, grey), _stack(test_arrays, grey)
    else:
        classes, files = scan(config.root)
        arrays, labels = _read_all(files, size)
        images = _stack(arrays, all(a.ndim == 2 for a in arrays))
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
