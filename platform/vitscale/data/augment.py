"""Batched augmentation on the data's device: crop with zero padding, flip, resize, normalise.

Works on a whole uint8 batch at once (no Python loop over samples), so the GPU that
trains the model also feeds it and no DataLoader workers are needed. Every random draw
comes from the caller's `torch.Generator`, which makes a run reproducible and resumable.
Draws happen on the generator's device and move to the images' device, so a CPU or a
CUDA generator both work (one on the data's device avoids the small transfers).
"""

from __future__ import annotations

from functools import lru_cache

import torch
import torch.nn.functional as F


def crop_flip(
    images: torch.Tensor,
    padding: int,
    hflip: bool,
    generator: torch.Generator,
    drawn: int | None = None,
    keep: slice = slice(None),
) -> torch.Tensor:
    """Random crop of the zero-padded batch back to its size, and random horizontal flip, per sample.

    Both are one gather on the uint8 batch: the flip reverses the column indices of the crop.
    `drawn`, `keep`: the batch is rows `keep` of a global batch of `drawn` images (one worker's
    shard of a data-parallel trial): the draws are made for all `drawn` and the shard keeps its
    rows, so every worker's generator stays in step with one process's and the shards together
    are augmented exactly as one process augments the global batch.
    """
    if padding <= 0 and not hflip:
        return images
    b, c, h, w = images.shape
    n = drawn or b
    gdev, dev = generator.device, images.device
    if padding > 0:
        offsets = torch.randint(0, 2 * padding + 1, (n, 2), generator=generator, device=gdev)[keep].to(dev)
        images = F.pad(images, (padding, padding, padding, padding))
    else:
        offsets = torch.zeros(b, 2, dtype=torch.int64, device=dev)
    rows = offsets[:, :1] + torch.arange(h, device=dev)  # (B, H)
    cols = offsets[:, 1:] + torch.arange(w, device=dev)  # (B, W)
    if hflip:
        flip = (torch.rand(n, generator=generator, device=gdev)[keep] < 0.5).to(dev)
        cols = torch.where(flip[:, None], cols.flip(1), cols)
    wp = images.shape[3]
    index = (rows[:, :, None] * wp + cols[:, None, :]).view(b, 1, h * w).expand(b, c, h * w)
    return images.reshape(b, c, -1).gather(2, index).view(b, c, h, w)


@lru_cache(maxsize=32)
def _affine(mean: tuple[float, ...], std: tuple[float, ...], device: torch.device):
    """uint8 value v -> (v / 255 - mean) / std  ==  v * scale - shift, per channel."""
    m = torch.tensor(mean, dtype=torch.float32)
    s = torch.tensor(std, dtype=torch.float32)
    scale, shift = (1.0 / (255.0 * s)).view(1, -1, 1, 1), (m / s).view(1, -1, 1, 1)
    return scale.to(device), shift.to(device)


def _resize(x: torch.Tensor, resolution: int) -> torch.Tensor:
    h, w = x.shape[-2:]
    if (h, w) == (resolution, resolution):
        return x
    # Bilinear, not nearest (8x8 digits -> 32 would be blocks); antialias only helps when shrinking.
    shrink = resolution < h or resolution < w
    return F.interpolate(
        x, size=(resolution, resolution), mode="bilinear", align_corners=False, antialias=shrink
    )


def prepare_batch(
    images: torch.Tensor, resolution: int, mean: tuple[float, ...], std: tuple[float, ...]
) -> torch.Tensor:
    """Eval path: uint8 (B, C, H, W) -> normalised float32 (B, C, R, R), no randomness."""
    scale, shift = _affine(tuple(mean), tuple(std), images.device)
    h, w = images.shape[-2:]
    x = images.to(torch.float32)
    # Normalising is affine and bilinear weights sum to 1, so the order is free: do it at the smaller size.
    if resolution * resolution >= h * w:
        return _resize(x.mul_(scale).sub_(shift), resolution).contiguous()
    return _resize(x, resolution).mul_(scale).sub_(shift).contiguous()


def augment_batch(
    images: torch.Tensor,
    resolution: int,
    mean: tuple[float, ...],
    std: tuple[float, ...],
    padding: int,
    hflip: bool,
    generator: torch.Generator,
    drawn: int | None = None,
    keep: slice = slice(None),
) -> torch.Tensor:
    """Train path: crop + flip (random, from `generator`; `drawn`, `keep`: a worker's shard, see
    `crop_flip`), then resize and normalise."""
    return prepare_batch(crop_flip(images, padding, hflip, generator, drawn, keep), resolution, mean, std)
