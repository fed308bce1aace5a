"""cifar10 / cifar100 from tiny copies in the official python format: archive, folder, errors, download."""

from __future__ import annotations

import hashlib
import io
import pickle
import urllib.error
import urllib.request
from dataclasses import replace

import numpy as np
import pytest
import torch

from vitscale.data import DataConfig, load
from vitscale.data.datasets import cifar as cifar_module
from vitscale.errors import UserError

KINDS = ("cifar10", "cifar100")
TRAIN_FILES = {"cifar10": [f"data_batch_{i}" for i in range(1, 6)], "cifar100": ["train"]}
TEST_FILE = {"cifar10": "test_batch", "cifar100": "test"}
LABEL_KEY = {"cifar10": b"labels", "cifar100": b"fine_labels"}


def _expected(files: dict[str, bytes], kind: str):
    batches = [pickle.loads(files[f], encoding="bytes") for f in TRAIN_FILES[kind]]
    images = torch.from_numpy(np.concatenate([b[b"data"] for b in batches])).view(-1, 3, 32, 32)
    labels = torch.tensor(sum((b[LABEL_KEY[kind]] for b in batches), []))
    return images, labels


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("layout", ["archive", "folder", "dir_with_archive", "dir_with_folder"])
def test_loads_every_layout(tmp_path, cifar, kind, layout):
    files = cifar.files(kind)
    if layout == "archive":
        root = cifar.write_archive(tmp_path, kind, files)
    elif layout == "folder":
        root = cifar.write_folder(tmp_path, kind, files)
    else:
        (cifar.write_archive if layout == "dir_with_archive" else cifar.write_folder)(tmp_path, kind, files)
        root = tmp_path
    bundle = load(DataConfig(dataset=kind, root=str(root)), "cpu")
    images, labels = _expected(files, kind)
    # train + val = the official training split (val: a stratified tenth held out of it)
    together = torch.cat([bundle.train_images, bundle.val_images])
    assert together.shape[0] == images.shape[0]
    assert sorted(together.flatten(1).sum(1).tolist()) == sorted(images.flatten(1).sum(1).tolist())
    assert sorted(torch.cat([bundle.train_labels, bundle.val_labels]).tolist()) == sorted(labels.tolist())
    assert abs(bundle.val_images.shape[0] - 0.1 * images.shape[0]) <= bundle.num_classes
    test = pickle.loads(files[TEST_FILE[kind]], encoding="bytes")  # test = the official test split
    assert bundle.test_images.shape == (len(test[b"data"]), 3, 32, 32)
    assert bundle.test_labels.tolist() == test[LABEL_KEY[kind]]
    assert bundle.num_classes == (10 if kind == "cifar10" else 100) and bundle.in_chans == 3
    assert bundle.class_names[0] == ("airplane" if kind == "cifar10" else "c0")
    assert bundle.hflip is True and bundle.crop_padding == 4


def _one_line_error(config: DataConfig) -> str:
    with pytest.raises(UserError) as info:
        load(config, "cpu")
    message = str(info.value)
    assert "\n" not in message
    return message


@pytest.mark.parametrize("kind", KINDS)
def test_missing_root_names_path_and_files(tmp_path, kind):
    missing = tmp_path / "nowhere"
    message = _one_line_error(DataConfig(dataset=kind, root=str(missing)))
    assert str(missing) in message
    assert (
        cifar_module.CIFAR10.archive in message if kind == "cifar10" else "cifar-100-python.tar.gz" in message
    )
    assert ("data_batch_1" if kind == "cifar10" else "train") in message
    assert "download" in message


def test_root_not_set():
    message = _one_line_error(DataConfig(dataset="cifar10"))
    assert "data.root" in message and "cifar-10-python.tar.gz" in message


def test_empty_dir_is_no_data(tmp_path):
    message = _one_line_error(DataConfig(dataset="cifar100", root=str(tmp_path)))
    assert str(tmp_path) in message and "cifar-100-python/" in message


def test_incomplete_folder_names_missing_files(tmp_path, cifar):
    folder = cifar.write_folder(tmp_path, "cifar10", cifar.files("cifar10"))
    (folder / "data_batch_3").unlink()
    (folder / "batches.meta").unlink()
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder) in message and "data_batch_3, batches.meta" in message


def test_incomplete_or_corrupt_archive(tmp_path, cifar):
    files = cifar.files("cifar100")
    del files["test"]
    archive = cifar.write_archive(tmp_path / "a", "cifar100", files)
    message = _one_line_error(DataConfig(dataset="cifar100", root=str(archive)))
    assert str(archive) in message and "missing test" in message
    broken = tmp_path / "b" / "cifar-100-python.tar.gz"
    broken.parent.mkdir()
    broken.write_bytes(b"not a gzip file")
    message = _one_line_error(DataConfig(dataset="cifar100", root=str(broken)))
    assert str(broken) in message and "tar.gz" in message


def test_pickle_with_foreign_globals_is_refused(tmp_path, cifar):
    files = cifar.files("cifar10")
    files["test_batch"] = pickle.dumps({b"data": print}, protocol=2)  # a global outside the allow-list
    folder = cifar.write_folder(tmp_path, "cifar10", files)
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder / "test_batch") in message and "print is not allowed" in message


def test_download_offline_fails_clearly(tmp_path, monkeypatch):
    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(urllib.request, "urlopen", offline)
    root = tmp_path / "cifar"
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(root), download=True))
    assert cifar_module.CIFAR10.url in message and str(root) in message and "offline" in message
    assert not any(root.glob("*.part"))


def test_download_fetches_the_archive_into_root(tmp_path, cifar, monkeypatch):
    payload = cifar.archive_bytes("cifar10", cifar.files("cifar10"))
    seen = []

    def fake_urlopen(url, timeout=None):
        seen.append(url)
        return io.BytesIO(payload)

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    tiny = replace(cifar_module.CIFAR10, md5=hashlib.md5(payload).hexdigest())
    monkeypatch.setattr(cifar_module, "CIFAR10", tiny)
    bundle = load(DataConfig(dataset="cifar10", root=str(tmp_path / "dl"), download=True), "cpu")
    assert seen == [tiny.url]
    assert (tmp_path / "dl" / "cifar-10-python.tar.gz").read_bytes() == payload
    assert bundle.train_images.shape[0] + bundle.val_images.shape[0] == 30
    # Present now: a second load does not touch the network.
    monkeypatch.setattr(urllib.request, "urlopen", None)
    load(DataConfig(dataset="cifar10", root=str(tmp_path / "dl"), download=True), "cpu")


def test_str_keyed_repickle_is_accepted(tmp_path, cifar):
    """Copies re-pickled under Python 3 with str keys load like the official bytes-keyed files."""
    files = cifar.files("cifar10")
    for name, raw in files.items():
        obj = pickle.loads(raw, encoding="bytes")
        files[name] = pickle.dumps({k.decode(): v for k, v in obj.items()})
    bundle = load(
        DataConfig(dataset="cifar10", root=str(cifar.write_folder(tmp_path, "cifar10", files))), "cpu"
    )
    assert (
        bundle.train_images.shape[0] + bundle.val_images.shape[0] == 30 and bundle.class_names[-1] == "truck"
    )
