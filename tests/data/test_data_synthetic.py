"""synthetic: deterministic by seed, any resolution, class = direction from the disc to the square."""

from __future__ import annotations

import math

import torch

from vitscale.data import DataConfig, load
from vitscale.data.datasets import synthetic


def _config(**kw) -> DataConfig:
    return DataConfig(dataset="synthetic", num_train=64, num_val=32, **kw)


def test_deterministic_by_seed_and_sized_by_config():
    a, b, c = load(_config(), "cpu"), load(_config(), "cpu"), load(_config(split_seed=1), "cpu")
    assert a.train_images.shape == (64, 3, 32, 32) and a.val_images.shape == (32, 3, 32, 32)
    assert torch.equal(a.train_images, b.train_images) and torch.equal(a.val_labels, b.val_labels)
    assert not torch.equal(a.train_images, c.train_images)
    assert not torch.equal(a.train_images[:32], a.val_images)  # train and val are different draws
    assert a.num_classes == 10 and a.hflip is False and a.crop_padding == 2


def test_any_resolution_and_class_count():
    bundle = load(_config(resolution=96, num_classes=3), "cpu")
    assert bundle.train_images.shape[1:] == (3, 96, 96)
    assert bundle.num_classes == 3 and sorted(set(bundle.train_labels.tolist())) == [0, 1, 2]
    small = load(_config(resolution=224, source_size=40), "cpu")
    assert small.source_size == (40, 40)


def test_label_is_the_direction_from_disc_to_square():
    k = 6
    p = synthetic._params(2000, k, seed=0)
    angle = torch.atan2(-(p["by"] - p["ay"]), p["bx"] - p["ax"])  # image y points down
    sector = torch.remainder(torch.round(angle / (2 * math.pi / k)), k).long()
    assert torch.equal(sector, p["labels"])
    assert torch.bincount(p["labels"]).min() >= 2000 // k  # balanced


def test_rendered_shapes_sit_where_the_labels_say():
    n, size = 64, 64
    images, labels = synthetic.generate(n, size, 4, seed=5)
    p = synthetic._params(n, 4, seed=5)
    assert torch.equal(labels, p["labels"])
    idx = torch.arange(n)
    for cx, cy, colour in (("ax", "ay", "colour_a"), ("bx", "by", "colour_b")):
        col, row = (p[cx] * size).long(), (p[cy] * size).long()
        pixel = images[idx, :, row, col].float() / 255
        assert (pixel - p[colour]).abs().mean() < 0.08  # the shape's colour, up to pixel noise


def test_pixel_statistics_do_not_tell_the_class():
    """Per-class means of per-image colour statistics are alike; only structure separates classes."""
    images, labels = synthetic.generate(2000, 32, 4, seed=0)
    stats = torch.cat([images.float().mean((2, 3)), images.float().std((2, 3))], 1) / 255  # (N, 6)
    class_means = torch.stack([stats[labels == c].mean(0) for c in range(4)])
    assert (class_means - class_means.mean(0)).abs().max() < 0.03
