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
from vitscale.errors import DataError, TrialFailure, UserError

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


# --- Damaged files (the cases tests/fuzz/test_fuzz_data.py found or keeps watching) -------------


def _folder_with(tmp_path, cifar, kind: str, name: str, changes: dict) -> tuple:
    """A valid tiny folder in which file `name` has `changes` applied to its dict."""
    files = cifar.files(kind, per_batch=4)
    obj = pickle.loads(files[name], encoding="bytes")
    obj.update(changes)
    files[name] = pickle.dumps(obj, protocol=2)
    return cifar.write_folder(tmp_path, kind, files), files


@pytest.mark.parametrize(
    "labels, needle",
    [
        ([0.0, 1.0, 2.0, 3.0], "integer labels (got a float64 array of shape (4,))"),
        (["0", "1", "2", "3"], "integer labels (got a <U1 array"),
        ([[0], [1], [2], [3]], "integer labels (got a int64 array of shape (4, 1))"),
        ([0, [1], 2, 3], "integer labels (got a list of length 4)"),  # ragged
        ([0, 1, 2], "list of 4 integer labels (got a int64 array of shape (3,))"),
        ([0, 1, 2, 2**70], "integer labels (got a list of length 4)"),  # beyond int64
        (np.int64(3), "integer labels (got a int64)"),
        (7, "integer labels (got a int)"),
        ([0, 1, 2, 10], "label 10 (row 3) is outside 0..9, the 10 classes of batches.meta"),
        ([0, 1, -1, 2], "label -1 (row 2) is outside 0..9"),
    ],
)
def test_bad_labels_are_one_line_naming_the_file(tmp_path, cifar, labels, needle):
    folder, _ = _folder_with(tmp_path, cifar, "cifar10", "data_batch_2", {b"labels": labels})
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder / "data_batch_2") in message and needle in message


@pytest.mark.parametrize(
    "data, needle",
    [
        (np.zeros((4, 3072), np.float32), "got a float32 array of shape (4, 3072)"),
        (np.zeros((4, 3072), np.int64), "got a int64 array of shape (4, 3072)"),
        (np.zeros((4, 3071), np.uint8), "got a uint8 array of shape (4, 3071)"),
        (np.zeros((4, 3, 32, 32), np.uint8), "got a uint8 array of shape (4, 3, 32, 32)"),
        ([[0] * 3072] * 4, "got a list of length 4"),
        (np.zeros((0, 3072), np.uint8), "holds no images"),
    ],
)
def test_bad_data_arrays_are_one_line_naming_the_file(tmp_path, cifar, data, needle):
    folder, _ = _folder_with(tmp_path, cifar, "cifar100", "test", {b"data": data, b"fine_labels": [0] * 4})
    message = _one_line_error(DataConfig(dataset="cifar100", root=str(folder)))
    assert str(folder / "test") in message and needle in message


def test_labels_as_numpy_integers_and_fortran_data_load(tmp_path, cifar):
    """Re-pickled copies often hold numpy labels and column-major data: still the official data."""
    files = cifar.files("cifar10", per_batch=4)
    obj = pickle.loads(files["test_batch"], encoding="bytes")
    folder, _ = _folder_with(
        tmp_path, cifar, "cifar10", "test_batch",
        {b"labels": np.asarray(obj[b"labels"], np.uint8), b"data": np.asfortranarray(obj[b"data"])},
    )  # fmt: skip
    bundle = load(DataConfig(dataset="cifar10", root=str(folder)), "cpu")
    assert bundle.test_labels.tolist() == obj[b"labels"]
    assert torch.equal(bundle.test_images.flatten(1), torch.from_numpy(obj[b"data"]))


@pytest.mark.parametrize(
    "names, needle",
    [
        ([b"one"], "list of >= 2 class names (got a list of length 1)"),
        (list(range(10)), "list of >= 2 class names (got a list of length 10)"),
        (np.arange(10), "list of >= 2 class names (got a list of length 10)"),
        (None, "(got a NoneType)"),
        ("abc", "(got a str)"),
    ],
)
def test_bad_class_names(tmp_path, cifar, names, needle):
    folder, _ = _folder_with(tmp_path, cifar, "cifar10", "batches.meta", {b"label_names": names})
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder / "batches.meta") in message and needle in message


def test_class_names_as_a_numpy_array_or_undecodable_bytes_load(tmp_path, cifar):
    names = np.asarray([f"c{i}".encode() for i in range(9)] + [b"\xffend"])
    folder, _ = _folder_with(tmp_path, cifar, "cifar10", "batches.meta", {b"label_names": names})
    assert load(DataConfig(dataset="cifar10", root=str(folder)), "cpu").class_names[-1] == "\ufffdend"


@pytest.mark.parametrize("obj", [[1, 2], None, "data", (b"data",)])
def test_a_pickle_that_is_no_dict(tmp_path, cifar, obj):
    files = cifar.files("cifar10", per_batch=4)
    files["data_batch_5"] = pickle.dumps(obj, protocol=2)
    folder = cifar.write_folder(tmp_path, "cifar10", files)
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder / "data_batch_5") in message and f"(a {type(obj).__name__}, not a dict)" in message


def test_an_ordered_dict_repickle_loads(tmp_path, cifar):
    from collections import OrderedDict

    files = {
        n: pickle.dumps(OrderedDict(pickle.loads(raw, encoding="bytes")))
        for n, raw in cifar.files("cifar10").items()
    }
    load(DataConfig(dataset="cifar10", root=str(cifar.write_folder(tmp_path, "cifar10", files))), "cpu")


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_damaged_archive_is_one_line_never_a_zlib_traceback(tmp_path, cifar, damage):
    """Every truncation point and flipped byte of the deflate stream: one line naming the archive."""
    raw = cifar.archive_bytes("cifar10", cifar.files("cifar10", per_batch=2))
    for i, at in enumerate(range(10, len(raw) - 8, max(1, len(raw) // 60))):  # inside the deflate stream
        broken = raw[:at] if damage == "truncate" else raw[:at] + bytes([raw[at] ^ 0x5A]) + raw[at + 1 :]
        archive = tmp_path / str(i) / "cifar-10-python.tar.gz"
        archive.parent.mkdir()
        archive.write_bytes(broken)
        try:
            load(DataConfig(dataset="cifar10", root=str(archive)), "cpu")
        except DataError as exc:
            assert str(archive) in str(exc) and "\n" not in str(exc)


def test_bytes_global_only_makes_empty_bytes(tmp_path, cifar):
    """Protocol 2 writes b"" as a call of the global bytes; bytes(n) (n bytes allocated) is refused."""
    files = cifar.files("cifar10", per_batch=4)
    obj = pickle.loads(files["test_batch"], encoding="bytes")
    obj[b"batch_label"] = b""
    files["test_batch"] = pickle.dumps(obj, protocol=2)
    files["data_batch_1"] = b"\x80\x02c__builtin__\nbytes\nJ\x00\x00\x00\x40\x85R."  # bytes(2**30)
    folder = cifar.write_folder(tmp_path, "cifar10", files)
    message = _one_line_error(DataConfig(dataset="cifar10", root=str(folder)))
    assert str(folder / "data_batch_1") in message and "bytes with arguments is not allowed" in message


def test_data_errors_are_user_errors_and_trial_failures():
    """Outside a study: one line and exit 2; inside one: a FAILED trial with reason data_error."""
    assert issubclass(DataError, UserError) and issubclass(DataError, TrialFailure)
    assert DataError.reason == "data_error"
