"""imagefolder: class subfolders of PNG/JPEG, sorted classes, common size, stratified split, errors."""

from __future__ import annotations

import pytest
import torch

from vitscale.data import DataConfig, load
from vitscale.errors import UserError


def test_loads_sorted_classes_at_the_source_size(imagefolder):
    config = DataConfig(
        dataset="imagefolder", root=str(imagefolder), resolution=32, source_size=12, val_fraction=0.4
    )
    bundle = load(config, "cpu")
    assert bundle.class_names == ["ant", "bee", "cat"]  # sorted by name, not by creation
    assert bundle.train_images.shape[1:] == (3, 12, 12) and bundle.in_chans == 3
    sizes = [bundle.train_images.shape[0], bundle.val_images.shape[0], bundle.test_images.shape[0]]
    assert sum(sizes) == 15  # notes.txt ignored
    assert torch.bincount(bundle.test_labels).tolist() == [1, 1, 1]  # the fixed stratified fifth
    assert torch.bincount(bundle.val_labels).tolist() == [2, 2, 2]  # 0.4 of the rest, stratified
    # Brightness was written as 80 * (index in "cat", "ant", "bee"): labels follow the folders.
    brightness = bundle.train_images.float().mean((1, 2, 3))
    means = [brightness[bundle.train_labels == c].mean().item() for c in range(3)]
    assert means[2] < means[0] < means[1]  # cat (0) < ant (80) < bee (160)
    assert bundle.hflip is True and bundle.crop_padding == 1
    again = load(config, "cpu")
    assert torch.equal(bundle.val_images, again.val_images)


def test_default_source_size_is_the_resolution(imagefolder):
    bundle = load(DataConfig(dataset="imagefolder", root=str(imagefolder), resolution=16), "cpu")
    assert bundle.source_size == (16, 16)


def test_grey_images_keep_one_channel(tmp_path):
    from PIL import Image

    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(3):
            Image.new("L", (9, 9), color=40 * i).save(tmp_path / name / f"{i}.png")
    bundle = load(DataConfig(dataset="imagefolder", root=str(tmp_path), resolution=8), "cpu")
    assert bundle.in_chans == 1 and bundle.train_images.shape[1:] == (1, 8, 8)


def _message(config: DataConfig) -> str:
    with pytest.raises(UserError) as info:
        load(config, "cpu")
    assert "\n" not in str(info.value)
    return str(info.value)


def test_bad_roots_name_the_path_and_the_layout(tmp_path, imagefolder):
    missing = tmp_path / "missing"
    message = _message(DataConfig(dataset="imagefolder", root=str(missing)))
    assert str(missing) in message and "root/<class>/<image>" in message
    (tmp_path / "empty").mkdir()
    message = _message(DataConfig(dataset="imagefolder", root=str(tmp_path / "empty")))
    assert str(tmp_path / "empty") in message and ".png" in message
    assert "data.root" in _message(DataConfig(dataset="imagefolder"))
    broken = imagefolder / "bee" / "broken.png"
    broken.write_bytes(b"not a png")
    assert str(broken) in _message(DataConfig(dataset="imagefolder", root=str(imagefolder)))
