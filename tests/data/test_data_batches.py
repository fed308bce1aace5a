"""train_batches / eval_batches: shuffling, drop_last, pairing of images and labels, exact resume."""

from __future__ import annotations

import torch

from vitscale.data import (
    DataBundle,
    DataConfig,
    eval_batches,
    make_generator,
    num_train_batches,
    train_batches,
)


def _labelled_bundle(n: int = 50, classes: int = 5) -> DataBundle:
    """Every image is filled with its own index, so a batch can be checked against its labels."""
    images = torch.arange(n, dtype=torch.uint8).view(n, 1, 1, 1).expand(n, 1, 4, 4).contiguous()
    labels = torch.arange(n) % classes
    return DataBundle(
        train_images=images, train_labels=labels, val_images=images[:13], val_labels=labels[:13],
        test_images=images[13:20], test_labels=labels[13:20],
        num_classes=classes, in_chans=1, class_names=[str(c) for c in range(classes)],
        mean=(0.0,), std=(1 / 255,), hflip=True, crop_padding=1, source="test",
    )  # fmt: skip


def _indices(images: torch.Tensor) -> torch.Tensor:
    """With mean 0 and std 1/255 the centre pixel is the raw uint8 value: the sample index."""
    return images[:, 0, 1:3, 1:3].amax((1, 2)).round().long()


def test_epoch_is_a_shuffled_drop_last_pass():
    bundle = _labelled_bundle()
    config = DataConfig(resolution=4, crop_padding=0)
    batches = list(train_batches(bundle, config, 16, make_generator(bundle, 0)))
    assert len(batches) == num_train_batches(bundle, 16) == 3
    seen = torch.cat([_indices(x) for x, _ in batches])
    assert len(set(seen.tolist())) == 48  # no repeats; 2 dropped
    assert not torch.equal(seen, torch.arange(48))  # shuffled
    for x, y in batches:
        assert torch.equal(y, _indices(x) % 5) and x.dtype == torch.float32 and y.dtype == torch.int64


def test_small_set_gives_one_batch():
    bundle = _labelled_bundle(n=10)
    batches = list(train_batches(bundle, DataConfig(resolution=4), 64, make_generator(bundle, 0)))
    assert len(batches) == 1 and batches[0][0].shape == (10, 1, 4, 4)


def test_eval_batches_cover_val_in_order_without_augmentation():
    bundle = _labelled_bundle()
    config = DataConfig(resolution=4)
    batches = list(eval_batches(bundle, config, 5))
    assert [len(y) for _, y in batches] == [5, 5, 3]
    assert torch.equal(torch.cat([_indices(x) for x, _ in batches]), torch.arange(13))
    assert torch.equal(torch.cat([y for _, y in batches]), bundle.val_labels)


def test_resume_from_generator_state_is_exact():
    bundle = _labelled_bundle()
    config = DataConfig(resolution=8)
    gen = make_generator(bundle, 3)
    list(train_batches(bundle, config, 8, gen))  # epoch 1
    state = gen.get_state()  # what a checkpoint stores
    epoch2 = list(train_batches(bundle, config, 8, gen))

    resumed = make_generator(bundle, 999)
    resumed.set_state(state)
    again = list(train_batches(bundle, config, 8, resumed))
    assert all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(epoch2, again, strict=True)
    )
    first = list(train_batches(bundle, config, 8, make_generator(bundle, 3)))
    assert not torch.equal(first[0][0], epoch2[0][0])  # epochs differ


def test_config_overrides_the_data_set_defaults():
    bundle = _labelled_bundle()
    off = DataConfig(resolution=4, crop_padding=0, hflip=False)
    x, _ = next(train_batches(bundle, off, 50, make_generator(bundle, 0)))
    assert torch.all(x == x[:, :, :1, :1])  # constant images stay constant: no crop, no flip
