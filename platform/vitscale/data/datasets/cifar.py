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
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.download import fetch
from vitscale.data.registry import register_dataset
from vitscale.data.source import Source
from vitscale.errors import UserError


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
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
}


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles dicts of numpy arrays, lists and bytes; refuses any other global (no code runs)."""

    def find_class(self, module: str, name: str):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f"global {module}.{name} is not allowed")
        return super().find_class(module, name)


def _locate(v: Variant, root: str | None, download: bool) -> Path:
    """The archive file or the extracted folder under `root`; fetch the archive if asked to."""
    if root is None:
        raise UserError(
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
        return fetch(v.url, dest, v.md5, v.name)
    raise UserError(
        f"{v.name}: no {v.title} data at {path}; expected {v.expected()} (or set download: true to fetch it)"
    )


def _read_raw(v: Variant, where: Path) -> dict[str, bytes]:
    """File name -> bytes for every expected file, from the folder or the .tar.gz."""
    if where.is_dir():
        missing = [f for f in v.files if not (where / f).is_file()]
        if missing:
            raise UserError(
                f"{v.name}: {where} is incomplete: missing {', '.join(missing)}; expected {v.expected()}"
            )
        return {f: (where / f).read_bytes() for f in v.files}
    try:
        with tarfile.open(where, "r:gz") as tar:
            members = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            missing = [f for f in v.files if f not in members]
            if missing:
                raise UserError(
                    f"{v.name}: archive {where} is incomplete: missing {', '.join(missing)}; "
                    f"expected the official {v.archive}"
                )
            return {f: tar.extractfile(members[f]).read() for f in v.files}
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise UserError(
            f"{v.name}: {where} is not a readable .tar.gz ({' '.join(str(exc).split())}); expected {v.expected()}"
        ) from None


def _unpickle(v: Variant, raw: bytes, name: str) -> dict:
    try:
        obj = _ArrayUnpickler(io.BytesIO(raw), encoding="bytes").load()
    except Exception as exc:
        raise UserError(
            f"{v.name}: {name} is not a {v.title} python-version pickle ({' '.join(str(exc).split())})"
        ) from None
    if not isinstance(obj, dict):
        raise UserError(f"{v.name}: {name} is not a {v.title} python-version pickle (no dict)")
    # Official files (Python 2) give bytes keys; accept re-pickled copies with str keys too.
    return {k.encode() if isinstance(k, str) else k: val for k, val in obj.items()}


def _batch(v: Variant, raw: bytes, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    d = _unpickle(v, raw, name)
    data, labels = d.get(b"data"), d.get(v.label_key)
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072:
        raise UserError(f"{v.name}: {name} has no b'data' uint8 array of shape (N, 3072)")
    if labels is None or len(labels) != data.shape[0]:
        raise UserError(f"{v.name}: {name} has no {v.label_key!r} list of {data.shape[0]} labels")
    images = torch.from_numpy(np.ascontiguousarray(data)).view(-1, 3, 32, 32)
    return images, torch.as_tensor(np.asarray(labels), dtype=torch.int64)


def load_cifar(v: Variant, config: DataConfig) -> Source:
    where = _locate(v, config.root, config.download)
    raw = _read_raw(v, where)

    def origin(name: str) -> str:  # how error messages name a file
        return str(where / name) if where.is_dir() else f"{name} in {where}"

    train = [_batch(v, raw[f], origin(f)) for f in v.train_files]
    test_x, test_y = _batch(v, raw[v.test_file], origin(v.test_file))
    names = _unpickle(v, raw[v.meta_file], origin(v.meta_file)).get(v.names_key)
    if not names:
        raise UserError(f"{v.name}: {origin(v.meta_file)} has no {v.names_key!r} list")
    train_y = torch.cat([y for _, y in train])
    for labels in (train_y, test_y):
        if labels.numel() and (labels.min() < 0 or labels.max() >= len(names)):
            raise UserError(f"{v.name}: labels outside 0..{len(names) - 1} (the classes in {v.meta_file})")
    return Source(
        train_images=torch.cat([x for x, _ in train]),
        train_labels=train_y,
        test_images=test_x,  # the official test split; val is held out of train by load()
        test_labels=test_y,
        class_names=[n.decode() if isinstance(n, bytes) else str(n) for n in names],
        hflip=True,
        crop_padding=4,
    )


@register_dataset("cifar10")
def load_cifar10(config: DataConfig) -> Source:
    return load_cifar(CIFAR10, config)


@register_dataset("cifar100")
def load_cifar100(config: DataConfig) -> Source:
    return load_cifar(CIFAR100, config)
