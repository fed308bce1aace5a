"""`cifar10`, `cifar100`: the official "python version" archives, read from a local root.

`data.root` may be the .tar.gz, the extracted folder, or a directory holding either.
The archive is read in memory (nothing extracted, no paths from the archive trusted),
and the pickles are loaded with an allow-list of numpy globals only. `download: true`
is the only way this file touches the network.
"""

from __future__ import annotations

import io
import pickle
import tarfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.download import fetch
from vitscale.data.source import Source
from vitscale.errors import DataError, UserError


@dataclass(frozen=True)
class Variant:
    name: str
    title: str
    archive: str
    folder: str
    train_files: tuple[str, ...]
    test_file: str
    meta_file: str
    label_key: bytes
    names_key: bytes
    url: str
    md5: str

    @property
    def files(self) -> tuple[str, ...]:
        return (*self.train_files, self.test_file, self.meta_file)

    def expected(self) -> str:
        listed = (
            "data_batch_1..5, test_batch, batches.meta" if self.name == "cifar10" else ", ".join(self.files)
        )
        return f"{self.archive} or the folder {self.folder}/ ({listed})"


CIFAR10 = Variant(
    "cifar10", "CIFAR-10", "cifar-10-python.tar.gz", "cifar-10-batches-py",
    tuple(f"data_batch_{i}" for i in range(1, 6)), "test_batch", "batches.meta",
    b"labels", b"label_names",
    "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz", "c58f30108f718f92721af3b95e74349a",
)  # fmt: skip
CIFAR100 = Variant(
    "cifar100", "CIFAR-100", "cifar-100-python.tar.gz", "cifar-100-python",
    ("train",), "test", "meta", b"fine_labels", b"fine_label_names",
    "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz", "eb9058c3a382ffc7106e4002c42a8d85",
)  # fmt: skip

_ALLOWED_GLOBALS = {
    ("_codecs", "encode"),  # bytes written by Python 3 at protocol 2
    ("collections", "OrderedDict"),  # a copy re-pickled from an OrderedDict
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
}


def _empty_bytes(*args: object) -> bytes:
    """`bytes()` only: bytes(n) would let a file allocate n bytes."""
    if args:
        raise pickle.UnpicklingError("global bytes with arguments is not allowed")
    return b""


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts of numpy arrays, lists and bytes; refuses any other global (no code runs)."""

    def find_class(self, module: str, name: str):
        if (module, name) in (("__builtin__", "bytes"), ("builtins", "bytes")):
            return _empty_bytes  # how protocol 2 writes b"" (an empty array's buffer)
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def _locate(v: Variant, root: str | None, download: bool) -> Path:
    """The archive file or the extracted folder under `root`; fetch the archive if asked to."""
    if root is None:
        raise DataError(
            f"{v.name}: data.root is not set; point it at {v.expected()} or a directory holding either "
            "(or set download: true with a root to download into)"
        )
    path = Path(root).expanduser()
    if path.is_file():
        return path
    if path.is_dir():
        if any((path / f).exists() for f in v.files):
            return path  # the extracted folder itself (maybe renamed)
        if (path / v.folder).is_dir():
            return path / v.folder
        if (path / v.archive).is_file():
            return path / v.archive
    if download:
        dest = path if path.name.endswith(".tar.gz") else path / v.archive
        try:
            return fetch(v.url, dest, v.md5, v.name)
        except UserError as exc:  # offline, corrupted download: in a study, a failed trial
            raise DataError(str(exc)) from None
    raise DataError(
        f"{v.name}: no {v.title} data at {path}; expected {v.expected()} (or set download: true to fetch it)"
    )


def _read_raw(v: Variant, where: Path) -> dict[str, bytes]:
    """File name -> bytes for every expected file, from the folder or the .tar.gz."""
    if where.is_dir():
        missing = [f for f in v.files if not (where / f).is_file()]
        if missing:
            raise DataError(
                f"{v.name}: {where} is incomplete: missing {', '.join(missing)}; expected {v.expected()}"
            )
        return {f: (where / f).read_bytes() for f in v.files}
    try:
        with tarfile.open(where, "r:gz") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            missing = [f for f in v.files if f not in members]
            if missing:
                raise DataError(
                    f"{v.name}: archive {where} is incomplete: missing {', '.join(missing)}; "
                    f"expected the official {v.archive}"
                )
            return {f: tar.extractfile(members[f]).read() for f in v.files}
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:  # truncated, flipped bytes
        raise DataError(
            f"{v.name}: {where} is not a readable .tar.gz ({_one_line(exc)}); expected {v.expected()}"
        ) from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _unpickle(v: Variant, raw: bytes, name: str) -> dict:
    try:
        obj = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:  # any damage to the bytes; no code runs (see _ArrayUnpickler)
        raise DataError(
            f"{v.name}: {name} is not a {v.title} python-version pickle ({_one_line(exc)})"
        ) from None
    if not isinstance(obj, dict):
        raise DataError(
            f"{v.name}: {name} is not a {v.title} python-version pickle (a {type(obj).__name__}, not a dict)"
        )
    # Official files (Python 2) give bytes keys; accept re-pickled copies with str keys too.
    return {k.encode("utf-8", "replace") if isinstance(k, str) else k: val for k, val in obj.items()}


def _describe(value: object) -> str:
    if isinstance(value, np.ndarray):
        return f"a {value.dtype} array of shape {value.shape}"
    return f"a {type(value).__name__}" + (
        f" of length {len(value)}" if isinstance(value, list | tuple) else ""
    )


def _batch(v: Variant, raw: bytes, name: str, classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(uint8 (N, 3, 32, 32), int64 (N,)) of one batch file; DataError naming `name` otherwise."""
    d = _unpickle(v, raw, name)
    data, labels = d.get(b"data"), d.get(v.label_key)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise DataError(
            f"{v.name}: {name} has no b'data' uint8 array of shape (N, 3072) (got {_describe(data)})"
        )
    if data.shape[0] == 0:
        raise DataError(f"{v.name}: {name} holds no images (b'data' has 0 rows)")
    n = data.shape[0]
    array = None
    if isinstance(labels, list | tuple | np.ndarray):
        try:
            array = np.asarray(labels)
        except (ValueError, TypeError, OverflowError):  # ragged or odd elements
            array = None
    if array is None or array.shape != (n,) or array.dtype.kind not in "iu":
        got = _describe(array if array is not None and array.dtype.kind != "O" else labels)
        raise DataError(f"{v.name}: {name} has no {v.label_key!r} list of {n} integer labels (got {got})")
    outside = np.flatnonzero((array < 0) | (array >= classes))
    if outside.size:
        i = int(outside[0])
        raise DataError(
            f"{v.name}: {name}: label {array[i]} (row {i}) is outside 0..{classes - 1}, "
            f"the {classes} classes of {v.meta_file}"
        )
    images = torch.from_numpy(np.ascontiguousarray(data)).view(-1, 3, 32, 32)
    return images, torch.from_numpy(array.astype(np.int64))


def _class_names(v: Variant, raw: bytes, name: str) -> list[str]:
    names = _unpickle(v, raw, name).get(v.names_key)
    if isinstance(names, np.ndarray) and names.ndim == 1:
        names = names.tolist()
    if (
        not isinstance(names, list | tuple)
        or len(names) < 2
        or not all(isinstance(n, str | bytes) for n in names)
    ):
        raise DataError(
            f"{v.name}: {name} has no {v.names_key!r} list of >= 2 class names (got {_describe(names)})"
        )
    return [n.decode("utf-8", "replace") if isinstance(n, bytes) else n for n in names]


def load_cifar(v: Variant, config: DataConfig) -> Source:
    try:
        where = _locate(v, config.root, config.download)
        raw = _read_raw(v, where)
    except OSError as exc:  # unreadable file or folder (permissions, a name too long, ...)
        raise DataError(f"{v.name}: cannot read {config.root} ({_one_line(exc)})") from None

    def origin(name: str) -> str:  # how error messages name a file
        return str(where / name) if where.is_dir() else f"{name} in {where}"

    names = _class_names(v, raw[v.meta_file], origin(v.meta_file))
    train = [_batch(v, raw[f], origin(f), len(names)) for f in v.train_files]
    test_x, test_y = _batch(v, raw[v.test_file], origin(v.test_file), len(names))
    return Source(
        train_images=torch.cat([x for x, _ in train]),
        train_labels=torch.cat([y for _, y in train]),
        test_images=test_x,  # the official test split; val is held out of train by load()
        test_labels=test_y,
        class_names=names,
        hflip=True,
        crop_padding=4,
    )


def load_cifar10(config: DataConfig) -> Source:
    return load_cifar(CIFAR10, config)


def load_cifar100(config: DataConfig) -> Source:
    return load_cifar(CIFAR100, config)
