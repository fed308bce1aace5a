"""digits: real 8x8 images, train/val/test (test fixed, val a seeded stratified hold-out), caps."""

from __future__ import annotations

import numpy as np
import torch
from sklearn.datasets import load_digits

from vitscale.data import DataConfig, load
from vitscale.data.datasets.digits import bundled_csv, digits_arrays
from vitscale.data.splits import balanced_subset, stratified_split


def test_digits_bundle():
    bundle = load(DataConfig(), "cpu")
    assert bundle.source == "digits" and bundle.num_classes == 10 and bundle.in_chans == 1
    assert bundle.train_images.dtype == torch.uint8 and bundle.train_images.shape[1:] == (1, 8, 8)
    sizes = [bundle.train_images.shape[0], bundle.val_images.shape[0], bundle.test_images.shape[0]]
    assert sum(sizes) == 1797 and sizes[2] == 359  # test: a fixed stratified fifth
    assert abs(sizes[1] - 0.1 * (sizes[0] + sizes[1])) <= 10  # val: val_fraction 0.1 of train
    assert int(bundle.train_images.max()) == 255  # 16 -> 255
    assert bundle.hflip is False and bundle.crop_padding == 0
    assert bundle.class_names == [str(d) for d in range(10)]


def test_the_bundled_file_reads_as_scikit_learn_reads_it():
    """digits reads scikit-learn's CSV without importing it (issue 30): the same arrays."""
    assert bundled_csv() is not None  # else the fast path is never taken
    images, labels = digits_arrays()
    reference = load_digits()
    assert images.dtype == reference.images.dtype and np.array_equal(images, reference.images)
    assert labels.dtype == np.int64 and np.array_equal(labels, reference.target)


def test_split_is_stratified_disjoint_and_deterministic():
    labels = torch.from_numpy(load_digits().target).long()
    train, val = stratified_split(labels, 0.2, seed=3)
    assert set(train.tolist()).isdisjoint(val.tolist())
    assert sorted(train.tolist() + val.tolist()) == list(range(1797))
    counts, val_counts = torch.bincount(labels), torch.bincount(labels[val], minlength=10)
    assert torch.all((val_counts - counts * 0.2).abs() <= 1)
    again = stratified_split(labels, 0.2, seed=3)
    assert torch.equal(train, again[0]) and torch.equal(val, again[1])
    assert not torch.equal(val, stratified_split(labels, 0.2, seed=4)[1])


def test_load_is_deterministic_by_split_seed():
    a, b = load(DataConfig(split_seed=1), "cpu"), load(DataConfig(split_seed=1), "cpu")
    c = load(DataConfig(split_seed=2), "cpu")
    assert torch.equal(a.val_images, b.val_images) and torch.equal(a.val_labels, b.val_labels)
    assert not torch.equal(a.val_images, c.val_images)
    # The test split is the same for every split_seed and shares no image with train or val.
    assert torch.equal(a.test_images, c.test_images) and torch.equal(a.test_labels, c.test_labels)


def test_test_split_is_disjoint_from_train_and_val():
    from vitscale.data.datasets.digits import TEST_FRACTION, TEST_SEED

    labels = torch.from_numpy(load_digits().target).long()
    pool, test = stratified_split(labels, TEST_FRACTION, TEST_SEED)
    assert set(pool.tolist()).isdisjoint(test.tolist())
    bundle = load(DataConfig(), "cpu")
    images = torch.from_numpy(load_digits().images).mul(255.0 / 16.0).round().to(torch.uint8)
    assert torch.equal(bundle.test_images[:, 0], images[test])
    assert torch.bincount(bundle.test_labels).tolist() == torch.bincount(labels[test]).tolist()


def test_caps_are_balanced_and_deterministic():
    bundle = load(DataConfig(num_train=100, num_val=30), "cpu")
    assert bundle.train_images.shape[0] == 100 and bundle.val_images.shape[0] == 30
    assert torch.bincount(bundle.train_labels).tolist() == [10] * 10
    assert torch.bincount(bundle.val_labels).tolist() == [3] * 10
    again = load(DataConfig(num_train=100, num_val=30), "cpu")
    assert torch.equal(bundle.train_images, again.train_images)


def test_balanced_subset_with_uneven_classes():
    labels = torch.tensor([0] * 10 + [1] * 2 + [2] * 5)
    pick = balanced_subset(labels, 7, seed=0)
    assert torch.bincount(labels[pick], minlength=3).tolist() == [3, 2, 2]
    assert len(set(pick.tolist())) == 7
