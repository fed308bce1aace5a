"""One image file (a path, or the bytes of a tar member) -> a square uint8 array, as every image
reader of vitscale.data decodes it (imagefolder in memory, folders and tar shards streamed), so a
set read either way gives the same pixels.

The image is centre-cropped to a square and resized (PIL bilinear, antialiased) to `size`. Modes:
greyscale (1-bit, 8-bit, grey + alpha, 16-bit) gives (H, W), any colour mode (RGB, RGBA, palette,
CMYK) (H, W, 3), unless `mode` forces "L" or "RGB". Alpha is dropped (the colour stored under it is
kept, as torchvision's ImageFolder does); 16-bit images are scaled to 8 bits (value / 257), not
clipped. A file that does not decode is a DataError naming it.
"""

from __future__ import annotations

import io
import warnings
from pathlib import Path

import numpy as np

from vitscale.errors import DataError

# Greyscale modes: 1-bit, 8-bit, 8-bit with alpha, 16/32-bit integer, float. Any other mode is colour.
GREY_MODES = ("1", "L", "LA", "La", "I", "I;16", "I;16B", "I;16L", "I;16N", "F")


def one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def eight_bit(img):
    """`img` as 8-bit "L" (greyscale modes, alpha dropped) or "RGB" (all other modes, alpha dropped)."""
    from PIL import Image

    if img.mode.startswith("I;16") or img.mode == "I":  # 16-bit grey (PNG): scale, do not clip
        levels = np.clip(np.asarray(img, dtype=np.int64), 0, 65535)
        return Image.fromarray(((levels + 128) // 257).astype(np.uint8), mode="L")
    if img.mode == "F":
        return Image.fromarray((np.clip(np.asarray(img), 0.0, 1.0) * 255).round().astype(np.uint8), mode="L")
    return img.convert("L" if img.mode in GREY_MODES else "RGB")


def decode_image(
    source: Path | bytes, size: int, what: str, name: str | Path, mode: str | None = None
) -> np.ndarray:
    """`source` (a file, or its bytes) centre-cropped and resized to (size, size): uint8 (H, W) if
    grey, else (H, W, 3); `mode` "L" or "RGB" forces one. `what` (the data set) and `name` (the
    file, or the shard member) name it in the error of a file that does not decode."""
    from PIL import Image, ImageOps

    opened = io.BytesIO(source) if isinstance(source, bytes) else source
    try:
        with warnings.catch_warnings(), Image.open(opened) as img:
            warnings.simplefilter("ignore")  # PIL's palette/EXIF notes: the image is read all the same
            img = eight_bit(img)
            if mode is not None and img.mode != mode:
                img = img.convert(mode)
            img = ImageOps.fit(img, (size, size), method=Image.Resampling.BILINEAR)
            return np.asarray(img, dtype=np.uint8)
    except Exception as exc:  # PIL's decoders raise many kinds on damaged files; each names this file
        raise DataError(f"{what}: cannot read image {name} ({one_line(exc)})") from None


def decode_sample(samples, i: int, size: int, what: str, mode: str | None = None) -> np.ndarray:
    """Image `i` of a split's index (`vitscale.data.samples`) read and decoded as `decode_image`;
    a file that cannot be read (gone, unreadable) is a DataError naming it too."""
    name = samples.name(i)
    try:
        raw = samples.read(i)
    except OSError as exc:
        raise DataError(f"{what}: cannot read image {name} ({one_line(exc)})") from None
    return decode_image(raw, size, what, name, mode)
