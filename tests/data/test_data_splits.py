"""Three splits everywhere: val held out of train by val_fraction, test fixed, none overlapping."""

from __future__ import annotations

import pytest
import torch

from vitscale.data import DataConfig, load


def _rows(images: torch.Tensor) -> set[bytes]:
    return {bytes(row) for row in images.flatten(1).numpy()}


@pytest.mark.parametrize("fraction", [0.1, 0.3])
def test_val_fraction_moves_images_from_train_to_val_only(fraction):
    bundle = load(DataConfig(val_fraction=fraction), "cpu")
    pool = bundle.train_images.shape[0] + bundle.val_images.shape[0]
    assert abs(bundle.val_images.shape[0] - fraction * pool) <= 10  # per-class rounding
    default = load(DataConfig(), "cpu")
    assert torch.equal(bundle.test_images, default.test_images)  # test never moves


def test_splits_do_not_overlap_on_synthetic():
    bundle = load(DataConfig(dataset="synthetic", num_train=128, num_val=32, num_test=32), "cpu")
    train, val, test = (_rows(getattr(bundle, f"{s}_images")) for s in ("train", "val", "test"))
    assert not (train & val) and not (train & test) and not (val & test)
    other = load(DataConfig(dataset="synthetic", num_train=128, num_val=32, num_test=32, split_seed=5), "cpu")
    assert torch.equal(bundle.test_images, other.test_images)  # test is not moved by split_seed
    assert not torch.equal(bundle.val_images, other.val_images)


def test_imagefolder_with_train_and_test_folders(tmp_path, imagefolder):
    import shutil

    root = tmp_path / "split"
    shutil.copytree(imagefolder, root / "train")
    shutil.copytree(imagefolder, root / "test")
    bundle = load(DataConfig(dataset="imagefolder", root=str(root), resolution=16, val_fraction=0.4), "cpu")
    assert bundle.test_images.shape[0] == 15  # every image of test/
    assert bundle.train_images.shape[0] + bundle.val_images.shape[0] == 15
