"""On-device augmentation: shapes, device, normalisation, crop/flip semantics, determinism."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vitscale.data import DataConfig, load, make_generator
from vitscale.data.augment import augment_batch, crop_flip, prepare_batch

DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def _reference_crop_flip(images, offsets, flips, padding):
    """The obvious per-sample loop, to check the vectorised gather against."""
    padded = F.pad(images, (padding,) * 4)
    h, w = images.shape[-2:]
    out = []
    for img, (dy, dx), flip in zip(padded, offsets.tolist(), flips.tolist(), strict=True):
        crop = img[:, dy : dy + h, dx : dx + w]
        out.append(crop.flip(-1) if flip else crop)
    return torch.stack(out)


def test_crop_flip_matches_the_per_sample_reference():
    images = torch.randint(0, 256, (16, 3, 7, 9), dtype=torch.uint8)
    padding = 3
    gen = torch.Generator().manual_seed(0)
    out = crop_flip(images, padding, True, gen)
    replay = torch.Generator().manual_seed(0)  # the same draws, in the same order
    offsets = torch.randint(0, 2 * padding + 1, (16, 2), generator=replay)
    flips = torch.rand(16, generator=replay) < 0.5
    assert 0 < int(flips.sum()) < 16 and out.dtype == torch.uint8
    assert torch.equal(out, _reference_crop_flip(images, offsets, flips, padding))


def test_no_padding_no_flip_is_identity():
    images = torch.randint(0, 256, (4, 1, 8, 8), dtype=torch.uint8)
    assert torch.equal(crop_flip(images, 0, False, torch.Generator()), images)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("resolution", [8, 32, 5])
def test_augment_shape_dtype_device(device, resolution):
    images = torch.randint(0, 256, (10, 3, 16, 16), dtype=torch.uint8, device=device)
    gen = torch.Generator(device=device).manual_seed(1)
    out = augment_batch(images, resolution, (0.5, 0.5, 0.5), (0.25, 0.25, 0.25), 2, True, gen)
    assert out.shape == (10, 3, resolution, resolution) and out.dtype == torch.float32
    assert out.device.type == device and out.is_contiguous()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cpu_generator_drives_cuda_data():
    images = torch.randint(0, 256, (10, 3, 16, 16), dtype=torch.uint8, device="cuda")
    out = augment_batch(images, 32, (0.5,) * 3, (0.25,) * 3, 2, True, torch.Generator().manual_seed(0))
    assert out.device.type == "cuda"


def test_normalisation_uses_the_bundle_statistics():
    bundle = load(DataConfig(dataset="synthetic", num_train=256, num_val=16), "cpu")
    x = prepare_batch(bundle.train_images, 32, bundle.mean, bundle.std)  # source resolution: exact
    assert torch.allclose(x.mean((0, 2, 3)), torch.zeros(3), atol=1e-3)
    assert torch.allclose(x.std((0, 2, 3)), torch.ones(3), atol=1e-2)
    y = augment_batch(bundle.train_images, 64, bundle.mean, bundle.std, 2, True, make_generator(bundle, 0))
    assert y.mean().abs() < 0.3 and 0.6 < y.std() < 1.3  # crops, flips, upscaling: roughly


def test_digits_upscale_is_bilinear_not_nearest():
    bundle = load(DataConfig(num_train=20), "cpu")
    x = prepare_batch(bundle.train_images, 32, bundle.mean, bundle.std)
    assert x.shape == (20, 1, 32, 32)
    # Nearest would repeat each source pixel in 4x4 blocks; bilinear varies inside them.
    assert (x[:, :, 1::4, :] - x[:, :, 2::4, :]).abs().max() > 0.05


def test_downscale_antialiases():
    stripes = torch.zeros(1, 1, 64, 64, dtype=torch.uint8)
    stripes[..., ::2] = 255  # one-pixel stripes average to flat grey when shrunk properly
    x = prepare_batch(stripes, 16, (0.0,), (1.0,))[..., 1:-1]  # edge columns see the border
    assert torch.allclose(x, torch.full_like(x, 0.5), atol=0.02)


@pytest.mark.parametrize("device", DEVICES)
def test_deterministic_for_a_generator_seed(device):
    images = torch.randint(0, 256, (32, 3, 12, 12), dtype=torch.uint8, device=device)

    def run(seed):
        gen = torch.Generator(device=device).manual_seed(seed)
        return augment_batch(images, 24, (0.4,) * 3, (0.2,) * 3, 3, True, gen)

    assert torch.equal(run(7), run(7)) and not torch.equal(run(7), run(8))
