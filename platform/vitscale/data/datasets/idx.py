"""The IDX format of the MNIST family (LeCun's "idx1/idx3-ubyte" files), gzip-compressed or plain.

A file is a big-endian header — magic number 0x0000 TTNN (TT the element type, 0x08 = unsigned
byte; NN the number of dimensions), then NN uint32 sizes — followed by the elements, row-major.
Labels are magic 2049 (ubyte, 1 dimension), images 2051 (ubyte, 3 dimensions: N, rows, cols).

The header is checked before the body is read, and the body is read in chunks up to at most one
byte past what the header promises: a lying header cannot make this allocate more than the file
holds. Every problem is a one-line `DataError` naming the file and the fix.
"""

from __future__ import annotations

import gzip
import math
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, NoReturn

import numpy as np

from vitscale.errors import DataError

LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
_KINDS = {LABELS_MAGIC: "an IDX label file", IMAGES_MAGIC: "an IDX image file"}
_CHUNK = 1 << 22


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _read_up_to(stream: BinaryIO, n: int) -> bytearray:
    """Up to `n` bytes (fewer only at the end of the file), in chunks: memory follows the file."""
    buffer = bytearray()
    while len(buffer) < n and (chunk := stream.read(min(_CHUNK, n - len(buffer)))):
        buffer += chunk
    return buffer


def _describe_magic(magic: int) -> str:
    return f"magic {magic}" + (f" ({_KINDS[magic]})" if magic in _KINDS else f" (0x{magic:08x})")


def _parse(
    stream: BinaryIO, magic: int, side: int | None, fail: Callable[[str], NoReturn]
) -> tuple[tuple[int, ...], bytearray]:
    """(sizes, body) of one IDX file whose magic must be `magic`; `fail(problem)` raises."""
    ndim = magic & 0xFF
    head = _read_up_to(stream, 4 + 4 * ndim)
    if len(head) < 4:
        fail(f"is truncated: {len(head)} bytes, shorter than the 4-byte magic number")
    found = int.from_bytes(head[:4], "big")
    if found != magic:
        fail(f"has {_describe_magic(found)}, expected {magic} ({_KINDS[magic]})")
    if len(head) < 4 + 4 * ndim:
        fail(f"is truncated: {len(head)} bytes, shorter than its {4 + 4 * ndim}-byte header")
    sizes = tuple(int(s) for s in np.frombuffer(bytes(head[4:]), dtype=">u4"))
    if side is not None and sizes[1:] != (side, side):
        fail(f"holds {sizes[1]}x{sizes[2]} images, expected {side}x{side}")
    if sizes[0] == 0:
        fail("holds no items (its header gives a count of 0)")
    promised = math.prod(sizes)  # a Python int: 3 uint32 sizes overflow int64
    body = _read_up_to(stream, promised + 1)  # one byte more: a file longer than its header says
    if len(body) < promised:
        fail(
            f"is truncated: its header promises {promised} bytes of data ({sizes[0]} items), "
            f"the file holds {len(body)}"
        )
    if len(body) > promised:
        fail(f"is longer than its header says ({sizes[0]} items, {promised} bytes of data, then more)")
    return sizes, body


def read_idx(path: Path, magic: int, *, what: str, fix: str, side: int | None = None) -> np.ndarray:
    """The uint8 array of one IDX file (`.gz` is decompressed); `side` checks images are side x side.

    `what` (the data set) starts and `fix` (how to get an intact copy) ends every error message.
    """

    def fail(problem: str) -> NoReturn:
        raise DataError(f"{what}: {path} {problem}; {fix}")

    compressed = path.name.endswith(".gz")
    try:
        with gzip.open(path, "rb") if compressed else open(path, "rb") as stream:
            sizes, body = _parse(stream, magic, side, fail)
    except (OSError, EOFError, zlib.error) as exc:  # gzip.BadGzipFile is an OSError
        how = "a readable gzip file" if compressed else "readable"
        fail(f"is not {how} ({_one_line(exc)})")
    return np.frombuffer(body, dtype=np.uint8).reshape(sizes)
