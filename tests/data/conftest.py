"""Tiny data sets written in the real on-disk formats (CIFAR python pickles, IDX files, PNG folders)."""

from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import urllib.error
import urllib.request
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from PIL import Image


def official_pickle(obj: dict) -> bytes:
    """Protocol 2 with numpy's historical module path, as in the files from the CIFAR site."""
    return pickle.dumps(obj, protocol=2).replace(b"numpy._core.multiarray", b"numpy.core.multiarray")


def cifar_files(kind: str, per_batch: int = 6, seed: int = 0) -> dict[str, bytes]:
    """File name -> bytes of a tiny CIFAR-10 or CIFAR-100 in the official python format."""
    rng = np.random.default_rng(seed)
    classes = 10 if kind == "cifar10" else 100

    def batch(n: int, label_key: bytes) -> bytes:
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        labels = [int(v) for v in rng.integers(0, classes, n)]
        extra = {b"coarse_labels": [v % 20 for v in labels]} if kind == "cifar100" else {}
        names = [f"img_{i}.png".encode() for i in range(n)]
        return official_pickle(
            {b"batch_label": b"tiny", label_key: labels, b"data": data, b"filenames": names, **extra}
        )

    if kind == "cifar10":
        files = {f"data_batch_{i}": batch(per_batch, b"labels") for i in range(1, 6)}
        files["test_batch"] = batch(per_batch, b"labels")
        names = [n.encode() for n in ("airplane", "automobile", "bird", "cat", "deer")]
        names += [n.encode() for n in ("dog", "frog", "horse", "ship", "truck")]
        files["batches.meta"] = official_pickle({b"label_names": names, b"num_cases_per_batch": per_batch})
    else:
        files = {"train": batch(5 * per_batch, b"fine_labels"), "test": batch(per_batch, b"fine_labels")}
        files["meta"] = official_pickle(
            {b"fine_label_names": [f"c{i}".encode() for i in range(100)], b"coarse_label_names": [b"s"] * 20}
        )
    return files


FOLDERS = {"cifar10": "cifar-10-batches-py", "cifar100": "cifar-100-python"}
ARCHIVES = {"cifar10": "cifar-10-python.tar.gz", "cifar100": "cifar-100-python.tar.gz"}


def write_folder(parent: Path, kind: str, files: dict[str, bytes]) -> Path:
    folder = parent / FOLDERS[kind]
    folder.mkdir(parents=True)
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    return folder


def archive_bytes(kind: str, files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, raw in files.items():
            info = tarfile.TarInfo(f"{FOLDERS[kind]}/{name}")
            info.size = len(raw)
            tar.addfile(info, io.BytesIO(raw))
    return buffer.getvalue()


def write_archive(parent: Path, kind: str, files: dict[str, bytes]) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    path = parent / ARCHIVES[kind]
    path.write_bytes(archive_bytes(kind, files))
    return path


IDX_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


def idx_bytes(array: np.ndarray, magic: int | None = None) -> bytes:
    """One IDX file: big-endian magic (default: unsigned bytes, array.ndim dimensions), sizes, data."""
    magic = 0x0800 + array.ndim if magic is None else magic
    sizes = b"".join(int(n).to_bytes(4, "big") for n in array.shape)
    return magic.to_bytes(4, "big") + sizes + np.ascontiguousarray(array, dtype=np.uint8).tobytes()


def idx_arrays(n_train: int = 40, n_test: int = 20, seed: int = 0) -> dict[str, np.ndarray]:
    """Official file name -> uint8 array of a tiny MNIST-family set (28x28, labels cycle over 10 classes)."""
    rng = np.random.default_rng(seed)
    arrays = {}
    for split, n in (("train", n_train), ("t10k", n_test)):
        arrays[f"{split}-images-idx3-ubyte"] = rng.integers(0, 256, (n, 28, 28), dtype=np.uint8)
        arrays[f"{split}-labels-idx1-ubyte"] = rng.permutation(np.arange(n) % 10).astype(np.uint8)
    return arrays


def idx_files(n_train: int = 40, n_test: int = 20, gz: bool = False, seed: int = 0) -> dict[str, bytes]:
    """File name -> bytes of the four official IDX files of a tiny set; `gz`: gzip-compressed, named .gz."""
    files = {name: idx_bytes(array) for name, array in idx_arrays(n_train, n_test, seed).items()}
    if gz:
        return {f"{name}.gz": gzip.compress(raw, mtime=0) for name, raw in files.items()}
    return files


def write_files(folder: Path, files: dict[str, bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, raw in files.items():
        (folder / name).write_bytes(raw)
    return folder


def write_imagefolder(root: Path, per_class: int = 5, grey: bool = False) -> Path:
    """Three classes of small PNG/JPEG images of different sizes; class c is brighter with c."""
    rng = np.random.default_rng(0)
    for c, name in enumerate(("cat", "ant", "bee")):
        (root / name).mkdir(parents=True)
        for i in range(per_class):
            h, w = 10 + i, 14 - i
            array = (rng.integers(0, 40, (h, w, 1 if grey else 3)) + 80 * c).astype(np.uint8)
            img = Image.fromarray(array[..., 0] if grey else array)
            suffix = ".jpg" if (i == 0 and not grey) else ".png"
            img.save(root / name / f"{i}{suffix}")
    (root / "ant" / "notes.txt").write_text("not an image")
    return root


@pytest.fixture
def imagefolder(tmp_path: Path) -> Path:
    return write_imagefolder(tmp_path / "images")


@pytest.fixture
def offline(monkeypatch) -> None:
    """No network: every urlopen fails as it does without a route (name resolution)."""

    def fail(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", fail)


@pytest.fixture
def idx() -> SimpleNamespace:
    """The IDX writers above, for tests."""
    return SimpleNamespace(
        files=idx_files, arrays=idx_arrays, bytes=idx_bytes, write=write_files, names=IDX_FILES
    )


@pytest.fixture
def cifar() -> SimpleNamespace:
    """The writers above, for tests (conftest modules are not importable by name)."""
    return SimpleNamespace(
        files=cifar_files, write_folder=write_folder, write_archive=write_archive,
        archive_bytes=archive_bytes, folders=FOLDERS, archives=ARCHIVES,
    )  # fmt: skip
