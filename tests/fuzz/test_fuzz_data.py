"""Fuzz `vitscale data info` over the on-disk formats the data readers take from a user.

Each example starts from valid tiny data in the official formats (the writers of
tests/data/conftest.py: CIFAR python pickles in a folder or a .tar.gz, MNIST-family IDX files plain
or gzipped, PNG/JPEG class folders) and breaks it the ways a download, a copy or a hand-made set
can: pickles with dropped or renamed keys, arrays of the wrong dtype or shape, labels out of range,
of the wrong length or type, non-dict pickles and disallowed globals; archives truncated or with
flipped bytes; IDX headers with another magic or lying sizes, IDX and gzip bytes truncated or
flipped, files missing; image folders with empty classes, corrupt or zero-byte files, every PNG mode
(grey, grey+alpha, RGBA, palette, 16-bit, 1-bit), 1×1 images, a directory named like an image,
symlink loops. The contract: exit 0 with one JSON object, or exit 2 with one line naming a path of
the data — never a traceback, never a hang.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path

import numpy as np
from fuzz_support import assert_user_contract, fuzz_settings, run_cli
from hypothesis import given
from hypothesis import strategies as st
from PIL import Image

_spec = importlib.util.spec_from_file_location(
    "vitscale_data_writers", Path(__file__).resolve().parents[1] / "data" / "conftest.py"
)
writers = importlib.util.module_from_spec(_spec)  # conftest modules are not importable by name
_spec.loader.exec_module(writers)

KINDS = ("cifar10", "cifar100")
LABEL_KEY = {"cifar10": b"labels", "cifar100": b"fine_labels"}
NAMES_KEY = {"cifar10": b"label_names", "cifar100": b"fine_label_names"}
META = {"cifar10": "batches.meta", "cifar100": "meta"}
CLASSES = {"cifar10": 10, "cifar100": 100}


def check(argv: list[str], base: Path) -> int:
    """The user contract, plus: exit 0 prints one JSON object; exit 2 names a path under `base`."""
    result = run_cli("data", "info", "--json", *argv)
    lines = assert_user_contract(result)
    if result.code == 0:
        out = json.loads(result.out)
        assert out["num_train"] > 0 and out["num_classes"] >= 2, result.describe()
    else:
        assert len(lines) == 1, result.describe()
        assert str(base) in lines[0], result.describe()
    return result.code


caps = st.lists(
    st.sampled_from(["--num-train=1", "--num-train=7", "--num-val=1", "--num-test=2", "--val-fraction=0.5"]),
    max_size=2,
)


# --- CIFAR: the pickles ---------------------------------------------------------------------------


def _rows(obj: dict) -> int:
    data = obj.get(b"data")
    return len(data) if isinstance(data, np.ndarray) and data.ndim else 4


def bad_data(rows: int) -> st.SearchStrategy:
    """What b'data' holds in a broken file: wrong dtype, wrong shape, no array at all."""
    rng = np.random.default_rng(rows)
    pixels = rng.integers(0, 256, (rows, 3072))
    return st.sampled_from(
        [
            pixels.astype(np.float32),
            pixels.astype(np.float64),
            pixels.astype(np.int64),
            pixels.astype(np.int8),
            pixels.astype(np.uint16),
            pixels.astype(bool),
            pixels.astype(object),
            pixels.astype(">u2"),
            pixels.astype(np.uint8)[:, :3071],
            pixels.astype(np.uint8)[:, :3072].reshape(rows, 3, 32, 32),
            np.concatenate([pixels, pixels[:, :1]], axis=1).astype(np.uint8),
            pixels.astype(np.uint8).ravel(),
            np.asfortranarray(pixels.astype(np.uint8)),  # valid, but not C-ordered
            np.zeros((0, 3072), np.uint8),
            np.uint8(7),
            pixels.astype(np.uint8).tolist(),
            pixels.astype(np.uint8).tobytes(),
            None,
            "data",
            {b"data": 1},
        ]
    )


def bad_labels(rows: int, classes: int) -> st.SearchStrategy:
    ok = [i % classes for i in range(rows)]
    return st.sampled_from(
        [
            [*ok[:-1], classes],
            [*ok[:-1], -1],
            [*ok[:-1], 10**6],
            [*ok[:-1], 2**70],
            ok[:-1],
            [*ok, 0],
            [],
            [float(v) for v in ok],
            [float("nan")] * rows,
            [float("inf")] * rows,
            [str(v) for v in ok],
            [v.to_bytes(1, "little") for v in ok],
            [None] * rows,
            [[v] for v in ok],
            [[v, v] for v in ok][:-1] + [[0]],
            [bool(v % 2) for v in ok],
            np.asarray(ok, dtype=np.int64),
            np.asarray(ok, dtype=np.uint8),
            np.asarray(ok, dtype=np.float32),
            np.asarray(ok, dtype=np.int64).reshape(rows, 1),
            np.int64(3),
            tuple(ok),
            7,
            None,
            "labels",
            {0: 1},
        ]
    )


def bad_names(classes: int) -> st.SearchStrategy:
    good = [f"c{i}".encode() for i in range(classes)]
    return st.sampled_from(
        [
            [],
            None,
            [b"only"],
            good[:2],
            good + [b"extra"],
            [b"\xff\xfe" + n for n in good],
            [f"c{i}" for i in range(classes)],
            list(range(classes)),
            [None] * classes,
            np.asarray(good),
            np.arange(classes),
            b"names",
            "names",
            5,
            {n: 1 for n in good},
        ]
    )


class Foreign:  # pickled by reference: a global the reader must refuse
    pass


def _pickle_bytes(draw: st.DrawFn, obj) -> bytes:
    how = draw(st.sampled_from(["official", "official", "protocol", "str_keys", "ordered", "foreign"]))
    if how == "official":
        return writers.official_pickle(obj)
    if how == "protocol":
        return pickle.dumps(obj, protocol=draw(st.integers(0, pickle.HIGHEST_PROTOCOL)))
    if how == "str_keys" and isinstance(obj, dict):
        keys = [k.decode("utf-8", "surrogateescape") if isinstance(k, bytes) else k for k in obj]
        return pickle.dumps(dict(zip(keys, obj.values(), strict=True)))
    if how == "ordered" and isinstance(obj, dict):
        from collections import OrderedDict

        return pickle.dumps(OrderedDict(obj), protocol=2)
    if how == "foreign":
        return pickle.dumps({**obj, b"x": Foreign()} if isinstance(obj, dict) else Foreign())
    return writers.official_pickle(obj)


def mutate_pickle(draw: st.DrawFn, kind: str, name: str, raw: bytes) -> bytes | None:
    """One mutation of one CIFAR file; None deletes the file."""
    obj = pickle.loads(raw, encoding="bytes")
    classes = CLASSES[kind]
    op = draw(
        st.sampled_from(
            ["drop_key", "rename_key", "data", "labels", "names", "not_dict", "bytes", "delete", "value"]
        ),
        label=f"{name} op",
    )
    if op == "delete":
        return None
    if op == "bytes":
        return mutate_bytes(draw, raw)
    if op == "not_dict":
        return _pickle_bytes(draw, draw(st.sampled_from([[obj], list(obj.items()), None, 3, "x", b"x", ()])))
    if op == "drop_key":
        del obj[draw(st.sampled_from(sorted(obj)))]
    elif op == "rename_key":
        key = draw(st.sampled_from(sorted(obj)))
        obj[draw(st.sampled_from([key + b"s", key.upper(), key.decode(), b"", 0]))] = obj.pop(key)
    elif op == "data" and name != META[kind]:
        obj[b"data"] = draw(bad_data(_rows(obj)))
    elif op == "labels" and name != META[kind]:
        obj[LABEL_KEY[kind]] = draw(bad_labels(_rows(obj), classes))
    elif op == "names" and name == META[kind]:
        obj[NAMES_KEY[kind]] = draw(bad_names(classes))
    else:  # any key, any odd value
        obj[draw(st.sampled_from(sorted(obj)))] = draw(bad_labels(4, classes) | bad_names(classes))
    return _pickle_bytes(draw, obj)


def mutate_bytes(draw: st.DrawFn, raw: bytes) -> bytes:
    """Truncate at a random offset, flip a few bytes, or append junk."""
    op = draw(st.sampled_from(["truncate", "flip", "append", "empty"]))
    if op == "empty" or not raw:
        return b""
    if op == "truncate":
        return raw[: draw(st.integers(0, len(raw) - 1))]
    if op == "append":
        return raw + draw(st.binary(min_size=1, max_size=64))
    data = bytearray(raw)
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1))
        data[at] ^= draw(st.integers(1, 255))
    return bytes(data)


@fuzz_settings(default=200)
@given(data=st.data())
def test_mutated_cifar_never_crashes(data):
    kind = data.draw(st.sampled_from(KINDS), label="kind")
    layout = data.draw(st.sampled_from(["archive", "folder", "dir_with_archive", "dir_with_folder"]))
    files = writers.cifar_files(kind, per_batch=4, seed=data.draw(st.integers(0, 3)))
    for name in data.draw(st.lists(st.sampled_from(sorted(files)), max_size=3, unique=True), label="mutated"):
        mutated = mutate_pickle(data.draw, kind, name, files[name])
        if mutated is None:
            del files[name]
        else:
            files[name] = mutated
    with tempfile.TemporaryDirectory(prefix="vitscale-fuzz-cifar-") as tmp:
        base = Path(tmp)
        if layout.endswith("archive"):
            raw = writers.archive_bytes(kind, files)
            if data.draw(st.booleans(), label="archive bytes mutated"):
                raw = mutate_bytes(data.draw, raw)
            root = base / writers.ARCHIVES[kind]
            root.write_bytes(raw)
        else:
            root = writers.write_folder(base, kind, files)
        if layout.startswith("dir"):
            root = base
        check(["--dataset", kind, "--root", str(root), *data.draw(caps, label="caps")], base)


# --- IDX: fashion_mnist, mnist --------------------------------------------------------------------


def mutate_idx(draw: st.DrawFn, raw: bytes) -> bytes:
    """One mutation of one IDX file: another magic number, a lying size in its header, or byte damage."""
    op = draw(st.sampled_from(["bytes", "bytes", "magic", "size"]), label="idx op")
    if op == "bytes":
        return mutate_bytes(draw, raw)
    if op == "magic":
        magic = draw(st.sampled_from([2049, 2051, 2050, 2052, 0x0B03, 0x0D03, 0x08030000, 0]))
        return magic.to_bytes(4, "big") + raw[4:]
    ndim = raw[3]  # labels 1 (count), images 3 (count, rows, cols)
    at = 4 + 4 * draw(st.integers(0, ndim - 1), label="size field")
    n = int.from_bytes(raw[at : at + 4], "big")
    size = draw(st.sampled_from([0, 1, n - 1, n + 1, 2 * n, 2**31, 2**32 - 1]), label="size")
    return raw[:at] + size.to_bytes(4, "big") + raw[at + 4 :]


@fuzz_settings(default=100)
@given(data=st.data())
def test_mutated_idx_never_crashes(data):
    kind = data.draw(st.sampled_from(["fashion_mnist", "mnist"]), label="kind")
    files = writers.idx_files(n_train=20, n_test=10, seed=data.draw(st.integers(0, 3)))
    for name in data.draw(st.lists(st.sampled_from(sorted(files)), max_size=2, unique=True), label="mutated"):
        if data.draw(st.integers(0, 5), label=f"{name} deleted") == 0:
            del files[name]
        else:
            files[name] = mutate_idx(data.draw, files[name])
    with tempfile.TemporaryDirectory(prefix="vitscale-fuzz-idx-") as tmp:
        base = Path(tmp)
        for name, raw in files.items():
            if data.draw(st.booleans(), label=f"{name} gzipped"):
                raw = gzip.compress(raw, mtime=0)
                if data.draw(st.integers(0, 3), label=f"{name} gzip damaged") == 0:
                    raw = mutate_bytes(data.draw, raw)
                name += ".gz"
            (base / name).write_bytes(raw)
        check(["--dataset", kind, "--root", str(base), *data.draw(caps, label="caps")], base)


# --- imagefolder ----------------------------------------------------------------------------------


def odd_image(draw: st.DrawFn) -> tuple[Image.Image, str]:
    """A valid image in a mode or size the loader must cope with, and the suffix to save it as."""
    h, w = draw(st.sampled_from([(1, 1), (1, 9), (9, 1), (2, 3), (12, 7)]))
    mode = draw(st.sampled_from(["L", "LA", "RGBA", "P", "PA", "1", "I;16", "I", "RGB", "CMYK", "F"]))
    rng = np.random.default_rng(h * 31 + w)
    if mode in ("I;16", "I", "F"):
        levels = rng.integers(0, 65536, (h, w))
        img = Image.fromarray(
            {"I;16": levels.astype(np.uint16), "I": levels.astype(np.int32), "F": levels / 65535.0}[mode]
        )
    else:
        img = Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).convert(mode)
    suffix = ".jpg" if mode == "CMYK" or (mode in ("L", "RGB") and draw(st.booleans())) else ".png"
    return img, suffix


def _images(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in (".png", ".jpg"))


# Weighted towards images that must load (odd modes and sizes), then damaged ones, then layouts.
FOLDER_OPS = ["odd_image"] * 4 + ["all_odd"] * 3 + ["corrupt"] * 2 + ["empty_class", "emptied_class"]
FOLDER_OPS += ["dir_as_image", "file_class", "symlink_loop", "symlink_dir", "one_class", "hidden", "dangling"]


def mutate_folder(draw: st.DrawFn, root: Path) -> None:
    """One mutation of an image folder (root/<class>/<image>) in place."""
    classes = sorted(p for p in root.iterdir() if p.is_dir())
    images = _images(root)
    op = draw(st.sampled_from(FOLDER_OPS), label="folder op")
    if op == "empty_class":
        (root / draw(st.sampled_from(["aaa", "zzz", "empty"]))).mkdir(exist_ok=True)
    elif op == "emptied_class" and classes:
        for image in _images(draw(st.sampled_from(classes))):
            image.unlink()
    elif op == "corrupt" and images:
        image = draw(st.sampled_from(images))
        image.write_bytes(mutate_bytes(draw, image.read_bytes()))
    elif op in ("odd_image", "all_odd") and images:
        targets = images if op == "all_odd" else [draw(st.sampled_from(images))]
        for image in targets:
            img, suffix = odd_image(draw)
            image.unlink()
            try:
                img.save(image.with_suffix(suffix))
            except OSError:  # a mode this format cannot store: keep the set as it is
                img.convert("RGB").save(image.with_suffix(suffix))
    elif op == "dir_as_image" and classes:
        (draw(st.sampled_from(classes)) / "folder.png").mkdir(exist_ok=True)
    elif op == "file_class":
        (root / "notaclass").write_bytes(b"\x89PNG")
    elif op == "symlink_loop" and classes:
        loop = draw(st.sampled_from([root, *classes])) / "loop.png"
        if not loop.is_symlink():
            os.symlink(loop, loop)
    elif op == "symlink_dir" and not (root / "parent").is_symlink():
        os.symlink(root, root / "parent")  # a class folder that is the root itself
    elif op == "one_class" and classes:
        for folder in classes[1:]:
            folder.unlink() if folder.is_symlink() else shutil.rmtree(folder)
    elif op == "hidden":
        (root / ".cache").mkdir(exist_ok=True)
    elif op == "dangling" and classes:
        gone = draw(st.sampled_from(classes)) / "gone.png"
        if not gone.is_symlink():
            os.symlink(root / "nowhere.png", gone)


@fuzz_settings(default=150)
@given(data=st.data())
def test_mutated_imagefolder_never_crashes(data):
    with tempfile.TemporaryDirectory(prefix="vitscale-fuzz-images-") as tmp:
        base = Path(tmp)
        if data.draw(st.booleans(), label="train/ and test/"):
            roots = [
                writers.write_imagefolder(base / "train", per_class=3),
                writers.write_imagefolder(base / "test", per_class=2),
            ]
        else:
            roots = [writers.write_imagefolder(base, per_class=3)]
        for _ in range(data.draw(st.integers(1, 3), label="mutations")):
            mutate_folder(data.draw, data.draw(st.sampled_from(roots)))
        size = data.draw(st.sampled_from([[], ["--source-size=4"], ["--source-size=33"]]), label="size")
        check(
            ["--dataset", "imagefolder", "--root", str(base), "--resolution=8", *size, *data.draw(caps)], base
        )


def test_writers_give_valid_data(tmp_path):
    """The starting points load (else every mutation above proves nothing)."""
    for kind in KINDS:
        archive = writers.write_archive(tmp_path, kind, writers.cifar_files(kind, per_batch=4))
        assert check(["--dataset", kind, "--root", str(archive)], tmp_path) == 0
    for gz in (False, True):
        root = writers.write_files(tmp_path / f"idx-{gz}", writers.idx_files(n_train=20, n_test=10, gz=gz))
        assert check(["--dataset", "mnist", "--root", str(root)], tmp_path) == 0
    root = writers.write_imagefolder(tmp_path / "images", per_class=3)
    assert check(["--dataset", "imagefolder", "--root", str(root), "--resolution=8"], tmp_path) == 0
