"""fashion_mnist / mnist from tiny IDX files (gz and plain): splits, where they are found, damaged files."""

from __future__ import annotations

import gzip
import hashlib
import io
import tracemalloc
import urllib.request
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from vitscale.cli import main
from vitscale.data import DataConfig, load
from vitscale.data.datasets import mnist as mnist_module
from vitscale.errors import DataError

KINDS = ("fashion_mnist", "mnist")
FOLDER = {"fashion_mnist": "fashion-mnist", "mnist": "mnist"}
SYSTEM_FASHION = Path("/usr/share/datasets/fashion-mnist")


@pytest.fixture(autouse=True)
def no_default_places(tmp_path, monkeypatch):
    """No test reads this machine's $VITSCALE_DATA, ~/data or /usr/share/datasets unless it says so."""
    monkeypatch.delenv("VITSCALE_DATA", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(mnist_module, "SYSTEM_DATASETS", tmp_path / "system")


def _one_line_error(config: DataConfig) -> str:
    with pytest.raises(DataError) as info:
        load(config, "cpu")
    assert "\n" not in str(info.value)
    return str(info.value)


def _cli_error(capsys, *argv: str) -> str:
    """`vitscale data info ARGV`: exit 2 and exactly one `error:` line, no traceback."""
    with pytest.raises(SystemExit) as info:
        main(["data", "info", "--json", *argv])
    assert info.value.code == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.out + captured.err
    assert len(lines) == 1 and lines[0].startswith("error: "), captured.err
    return lines[0]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_reads_both_sets_from_a_root(tmp_path, idx, kind, gz):
    arrays = idx.arrays(n_train=100, n_test=30)
    root = idx.write(tmp_path / "data", idx.files(n_train=100, n_test=30, gz=gz))
    bundle = load(DataConfig(dataset=kind, root=str(root)), "cpu")
    # train + val = the official training split (val: a stratified tenth held out of it)
    assert bundle.train_images.shape == (90, 1, 28, 28) and bundle.val_images.shape == (10, 1, 28, 28)
    assert bundle.train_images.dtype == torch.uint8 and bundle.train_labels.dtype == torch.int64
    together = torch.cat([bundle.train_images, bundle.val_images]).flatten(1)
    official = torch.from_numpy(arrays["train-images-idx3-ubyte"]).flatten(1)
    assert sorted(together.sum(1).tolist()) == sorted(official.sum(1).tolist())
    assert torch.bincount(bundle.val_labels).tolist() == [1] * 10  # stratified
    # test = the official t10k split, in its order
    assert torch.equal(bundle.test_images[:, 0], torch.from_numpy(arrays["t10k-images-idx3-ubyte"]))
    assert bundle.test_labels.tolist() == arrays["t10k-labels-idx1-ubyte"].tolist()
    assert bundle.num_classes == 10 and bundle.in_chans == 1
    assert bundle.hflip is (kind == "fashion_mnist")
    assert bundle.crop_padding == (0 if kind == "fashion_mnist" else 2)  # articles fill the frame
    first_last = ("T-shirt/top", "Ankle boot") if kind == "fashion_mnist" else ("0", "9")
    assert (bundle.class_names[0], bundle.class_names[-1]) == first_last


def test_gz_plain_and_mixed_give_the_same_tensors(tmp_path, idx):
    plain, packed = idx.files(), idx.files(gz=True)
    mixed = {
        **{k: v for k, v in plain.items() if "images" in k},
        **{k: v for k, v in packed.items() if "labels" in k},
    }
    bundles = [
        load(DataConfig(dataset="mnist", root=str(idx.write(tmp_path / name, files))), "cpu")
        for name, files in (("plain", plain), ("gz", packed), ("mixed", mixed))
    ]
    for other in bundles[1:]:
        assert torch.equal(bundles[0].train_images, other.train_images)
        assert torch.equal(bundles[0].test_labels, other.test_labels)


def test_plain_file_is_preferred_over_its_gz(tmp_path, idx):
    root = idx.write(tmp_path / "d", idx.files(n_test=20))
    (root / "t10k-labels-idx1-ubyte.gz").write_bytes(b"not gzip at all")  # never opened
    assert load(DataConfig(dataset="mnist", root=str(root)), "cpu").num_classes == 10


@pytest.mark.parametrize("layout", ["root", "named", "torchvision"])
def test_root_may_hold_the_folder(tmp_path, idx, layout):
    sub = {"root": "", "named": "fashion-mnist", "torchvision": "FashionMNIST/raw"}[layout]
    idx.write(tmp_path / "data" / sub, idx.files(gz=True))
    bundle = load(DataConfig(dataset="fashion_mnist", root=str(tmp_path / "data")), "cpu")
    assert bundle.test_images.shape[0] == 20


@pytest.mark.parametrize("kind", KINDS)
def test_root_unset_searches_vitscale_data_then_home_then_system(tmp_path, idx, monkeypatch, kind):
    env, home, system = tmp_path / "env", tmp_path / "home", tmp_path / "system"
    for where, n_test in ((system, 10), (home / "data", 20), (env, 30)):  # told apart by test size
        idx.write(where / FOLDER[kind], idx.files(n_test=n_test, gz=n_test == 20))

    def found() -> int:
        return load(DataConfig(dataset=kind), "cpu").test_images.shape[0]

    monkeypatch.setenv("VITSCALE_DATA", str(env))
    assert found() == 30
    monkeypatch.delenv("VITSCALE_DATA")
    assert found() == 20
    for f in (home / "data" / FOLDER[kind]).iterdir():
        f.unlink()
    assert found() == 10


def test_absent_set_names_every_place_and_both_ways(tmp_path, monkeypatch):
    monkeypatch.setenv("VITSCALE_DATA", str(tmp_path / "env"))
    message = _one_line_error(DataConfig(dataset="fashion_mnist"))
    for place in (
        tmp_path / "env" / "fashion-mnist",
        tmp_path / "home/data/fashion-mnist",
        tmp_path / "system/fashion-mnist",
    ):
        assert str(place) in message
    assert "apt-get install dataset-fashion-mnist" in message and "data.root" in message
    assert "train-images-idx3-ubyte.gz" in message and "download: true" in message
    monkeypatch.delenv("VITSCALE_DATA")
    message = _one_line_error(DataConfig(dataset="mnist"))
    assert "$VITSCALE_DATA is unset" in message and str(tmp_path / "system/mnist") in message
    assert "apt-get" not in message and mnist_module.MNIST.url in message


def test_absent_root_through_the_cli_is_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "BAD"
    line = _cli_error(capsys, "--dataset", "fashion_mnist", "--root", str(bad))
    assert str(bad) in line and str(bad / "fashion-mnist") in line
    assert "apt-get install dataset-fashion-mnist" in line and "download: true" in line


def test_incomplete_folder_names_missing_files(tmp_path, idx):
    files = idx.files(gz=True)
    del files["t10k-images-idx3-ubyte.gz"]
    root = idx.write(tmp_path / "d", files)
    message = _one_line_error(DataConfig(dataset="mnist", root=str(root)))
    assert str(root) in message and "missing t10k-images-idx3-ubyte" in message


def test_root_that_is_a_file(tmp_path, idx):
    root = idx.write(tmp_path / "d", idx.files(gz=True))
    message = _one_line_error(DataConfig(dataset="mnist", root=str(root / "t10k-images-idx3-ubyte.gz")))
    assert "is a file" in message and "folder" in message


# --- Damaged files: one line naming the file, exit 2 ----------------------------------------------


def _gz_flipped(raw: bytes, make) -> bytes:
    packed = bytearray(gzip.compress(raw, mtime=0))
    packed[len(packed) // 2] ^= 0x5A
    return bytes(packed)


LABELS, IMAGES = "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte"
IMAGE_MAGIC, SHORT_MAGIC = (2051).to_bytes(4, "big"), (0x0B03).to_bytes(4, "big")  # 0x0B: int16 elements
# case -> (file, damage(raw, make: array -> IDX bytes), what the message says); 40 train, 20 test items
DAMAGE = {
    "truncated": (IMAGES, lambda raw, make: raw[:-100], "is truncated: its header promises 15680 bytes"),
    "header_cut": (IMAGES, lambda raw, make: raw[:10], "shorter than its 16-byte header"),
    "empty": (LABELS, lambda raw, make: b"", "shorter than the 4-byte magic number"),
    "longer": (LABELS, lambda raw, make: raw + b"\x00", "is longer than its header says"),
    "magic_swapped": (LABELS, lambda raw, make: IMAGE_MAGIC + raw[4:], "magic 2051 (an IDX image file), expected 2049"),
    "magic_other": (IMAGES, lambda raw, make: SHORT_MAGIC + raw[4:], "magic 2819 (0x00000b03), expected 2051"),
    "dims": (IMAGES, lambda raw, make: make(np.zeros((20, 32, 32), np.uint8)), "32x32 images, expected 28x28"),
    "no_items": (IMAGES, lambda raw, make: make(np.zeros((0, 28, 28), np.uint8)), "holds no items"),
    "count": (LABELS, lambda raw, make: make(np.arange(39, dtype=np.uint8) % 10), "holds 39 labels but"),
    "label_range": (LABELS, lambda raw, make: raw[:-1] + b"\x0a", "label 10 (item 39) is outside 0..9"),
    "gz_not_gzip": (IMAGES + ".gz", lambda raw, make: raw, "is not a readable gzip file (Not a gzipped file"),
    "gz_truncated": (IMAGES + ".gz", lambda raw, make: gzip.compress(raw)[:-30], "is not a readable gzip file"),
    "gz_flipped": (IMAGES + ".gz", _gz_flipped, "is not a readable gzip file"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(DAMAGE))
def test_damaged_file_is_one_line_exit_2(tmp_path, capsys, idx, case):
    name, damage, needle = DAMAGE[case]
    files = idx.files()
    stem = name.removesuffix(".gz")
    files[name] = damage(files.pop(stem), idx.bytes)
    root = idx.write(tmp_path / "d", files)
    line = _cli_error(capsys, "--dataset", "mnist", "--root", str(root))
    assert str(root / name) in line and needle in line, line
    assert "with the official" in line and "download: true" in line  # the fix


def test_damaged_system_copy_says_reinstall(tmp_path, idx):
    files = idx.files(gz=True)
    files["train-labels-idx1-ubyte.gz"] = files["train-labels-idx1-ubyte.gz"][:-12]
    idx.write(tmp_path / "system" / "fashion-mnist", files)
    message = _one_line_error(DataConfig(dataset="fashion_mnist"))
    assert "apt-get install --reinstall dataset-fashion-mnist" in message


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gz"])
def test_a_lying_header_allocates_nothing_big(tmp_path, idx, gz):
    """A header promising 2**32-1 images of 28x28 (3.4 TB) in a tiny file: truncated, at once."""
    files = idx.files(gz=gz)
    head = (2051).to_bytes(4, "big") + (2**32 - 1).to_bytes(4, "big") + (28).to_bytes(4, "big") * 2
    raw = head + bytes(28 * 28 * 3)
    name = "train-images-idx3-ubyte" + (".gz" if gz else "")
    files[name] = gzip.compress(raw) if gz else raw
    root = idx.write(tmp_path / "d", files)
    tracemalloc.start()
    try:
        message = _one_line_error(DataConfig(dataset="mnist", root=str(root)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "is truncated" in message and str(root / name) in message
    assert peak < 16 * 2**20


# --- download: true -------------------------------------------------------------------------------


def test_nothing_downloads_without_download_true(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("network used without download: true")

    monkeypatch.setattr(urllib.request, "urlopen", no_network)
    _one_line_error(DataConfig(dataset="fashion_mnist", root=str(tmp_path / "x")))
    _one_line_error(DataConfig(dataset="fashion_mnist"))


def _serve(monkeypatch, idx) -> list[str]:
    """urlopen serves the tiny .gz files by name; the Variant's md5s are theirs. Returns the URLs asked."""
    payload = idx.files(gz=True)
    seen = []

    def fake_urlopen(url, timeout=None):
        seen.append(url)
        return io.BytesIO(payload[url.rsplit("/", 1)[1]])

    monkeypatch.setattr(urllib.request, "urlopen", fake_urlopen)
    md5 = tuple(hashlib.md5(payload[f"{name}.gz"]).hexdigest() for name in mnist_module.FILES)
    tiny = replace(mnist_module.FASHION_MNIST, md5=md5)
    monkeypatch.setattr(mnist_module, "FASHION_MNIST", tiny)
    return seen


def test_download_fetches_only_missing_files_into_root(tmp_path, idx, monkeypatch):
    seen = _serve(monkeypatch, idx)
    root = idx.write(tmp_path / "dl", {"train-images-idx3-ubyte": idx.files()["train-images-idx3-ubyte"]})
    bundle = load(DataConfig(dataset="fashion_mnist", root=str(root), download=True), "cpu")
    url = mnist_module.FASHION_MNIST.url
    assert seen == [
        url + n
        for n in ("train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")
    ]
    assert bundle.train_images.shape[0] + bundle.val_images.shape[0] == 40
    assert not any(root.glob("*.part"))
    monkeypatch.setattr(urllib.request, "urlopen", None)  # present now: no network
    load(DataConfig(dataset="fashion_mnist", root=str(root), download=True), "cpu")


def test_download_with_root_unset_goes_to_the_first_place(tmp_path, idx, monkeypatch):
    _serve(monkeypatch, idx)
    monkeypatch.setenv("VITSCALE_DATA", str(tmp_path / "env"))
    load(DataConfig(dataset="fashion_mnist", download=True), "cpu")
    assert sorted(p.name for p in (tmp_path / "env" / "fashion-mnist").iterdir()) == sorted(
        idx.files(gz=True)
    )


def test_download_offline_fails_clearly(tmp_path, offline):
    root = tmp_path / "mnist"
    message = _one_line_error(DataConfig(dataset="mnist", root=str(root), download=True))
    assert mnist_module.MNIST.url + "train-images-idx3-ubyte.gz" in message and str(root) in message
    assert "offline" in message and not any(root.glob("*.part"))


# --- The real files (Debian's dataset-fashion-mnist) ----------------------------------------------


@pytest.mark.skipif(
    not (SYSTEM_FASHION / "t10k-labels-idx1-ubyte.gz").is_file(),
    reason=f"no Fashion-MNIST under {SYSTEM_FASHION}: apt-get install dataset-fashion-mnist",
)
def test_real_fashion_mnist_from_the_debian_package(monkeypatch):
    monkeypatch.setattr(mnist_module, "SYSTEM_DATASETS", SYSTEM_FASHION.parent)  # the default search
    bundle = load(DataConfig(dataset="fashion_mnist", num_train=300, num_val=100, num_test=200), "cpu")
    assert bundle.train_images.shape == (300, 1, 28, 28) and bundle.test_images.shape == (200, 1, 28, 28)
    assert torch.bincount(bundle.train_labels).tolist() == [30] * 10  # 6,000 a class: balanced caps
    assert torch.bincount(bundle.test_labels).tolist() == [20] * 10
    assert bundle.class_names[9] == "Ankle boot" and bundle.hflip is True
    assert 0.25 < bundle.mean[0] < 0.32 and 0.3 < bundle.std[0] < 0.4  # of the full 54,000 training images
    assert int(bundle.train_images.max()) == 255
