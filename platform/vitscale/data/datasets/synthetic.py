"""`synthetic`: generated images whose class is a spatial *relation*, at any resolution.

Each image holds a large disc (A) and a small square (B) at random places, sizes and
colours on a noisy, shaded background. The class is the direction from A to B, in
`num_classes` equal sectors (sector 0 centred on "right", counter-clockwise). Pixel
statistics carry no class information; a model must locate both shapes and relate
them across the image, which is what a token mixer does. A horizontal flip mirrors the
direction, so it changes the class: hflip defaults to off.

Generation is vectorised with torch in chunks and deterministic for (split_seed,
source_size, sizes, num_classes); train and val come from separate seeds.
"""

from __future__ import annotations

import math

import torch

from vitscale.data.config import DataConfig
from vitscale.data.source import Source

DEFAULT_TRAIN = 4096
DEFAULT_VAL = 1024
DEFAULT_TEST = 2048
TEST_SEED = 2**32 - 1  # torch seeds with 32 bits; train/val use 2·split_seed (+1), split_seed < 2**30
_PIXELS_PER_CHUNK = 1 << 21
_NOISE_POOL = 16
# Geometry as fractions of the image side.
_DISC_RADIUS = (0.10, 0.14)
_SQUARE_HALF = (0.045, 0.065)
_DISTANCE = (0.30, 0.60)
_CENTRE_BOX = (0.20, 0.80)  # shape centres stay inside, so random crops rarely cut them
_SECTOR_USE = 0.7  # angles fill the middle 70 % of each sector: classes are separable


def _uniform(gen: torch.Generator, n: int, lo: float, hi: float) -> torch.Tensor:
    return lo + (hi - lo) * torch.rand(n, generator=gen)


def _params(n: int, num_classes: int, seed: int) -> dict[str, torch.Tensor]:
    """Per-image labels, geometry and colours (small tensors, one generator)."""
    gen = torch.Generator().manual_seed(seed)
    labels = (torch.arange(n) % num_classes)[torch.randperm(n, generator=gen)]
    jitter = _uniform(gen, n, -_SECTOR_USE / 2, _SECTOR_USE / 2)
    angle = 2 * math.pi * (labels + jitter) / num_classes
    dist = _uniform(gen, n, *_DISTANCE)
    hx, hy = 0.5 * dist * torch.cos(angle), -0.5 * dist * torch.sin(angle)  # image y points down
    lo, hi = _CENTRE_BOX
    mx = lo + hx.abs() + (hi - lo - 2 * hx.abs()) * torch.rand(n, generator=gen)
    my = lo + hy.abs() + (hi - lo - 2 * hy.abs()) * torch.rand(n, generator=gen)
    background = torch.rand(n, 3, generator=gen)
    # Shape colours differ from the background by 0.3..0.7 in every channel: always visible.
    colour_a = (background + 0.5 + _uniform(gen, 3 * n, -0.2, 0.2).view(n, 3)) % 1.0
    colour_b = (background + 0.5 + _uniform(gen, 3 * n, -0.2, 0.2).view(n, 3)) % 1.0
    shade_angle = _uniform(gen, n, 0, 2 * math.pi)
    return {
        "labels": labels,
        "ax": mx - hx, "ay": my - hy, "bx": mx + hx, "by": my + hy,
        "ra": _uniform(gen, n, *_DISC_RADIUS), "rb": _uniform(gen, n, *_SQUARE_HALF),
        "background": background, "colour_a": colour_a, "colour_b": colour_b,
        "shade_x": 0.15 * torch.cos(shade_angle), "shade_y": 0.15 * torch.sin(shade_angle),
    }  # fmt: skip


def _paint(image: torch.Tensor, cx, cy, half, colour, max_half: float, disc: bool) -> None:
    """Blend one shape per image into `image` (n, 3, S, S, 0..255 scale) in place.

    Only a P x P patch around each shape is touched (gather, blend, scatter), so the cost
    is a few percent of the image instead of full-image passes per shape.
    """
    n, _, size, _ = image.shape
    patch = min(size, math.ceil(2 * max_half * size) + 3)
    steps = torch.arange(patch)
    left = (cx * size - patch / 2).floor().long().clamp(0, size - patch)
    top = (cy * size - patch / 2).floor().long().clamp(0, size - patch)
    cols, rows = left[:, None] + steps, top[:, None] + steps  # (n, P) pixel indices
    dx = ((cols + 0.5) / size - cx[:, None]).view(n, 1, patch)
    dy = ((rows + 0.5) / size - cy[:, None]).view(n, patch, 1)
    dist = torch.sqrt(dx**2 + dy**2) if disc else torch.maximum(dx.abs(), dy.abs())
    # Coverage from the signed distance in pixels: anti-aliased over one pixel.
    cover = (0.5 - (dist - half.view(n, 1, 1)) * size).clamp_(0, 1).unsqueeze(1)
    index = (rows[:, :, None] * size + cols[:, None, :]).view(n, 1, -1).expand(n, 3, patch * patch)
    flat = image.view(n, 3, size * size)
    region = flat.gather(2, index).view(n, 3, patch, patch)
    region = torch.lerp(region, colour.view(n, 3, 1, 1).expand_as(region), cover)
    flat.scatter_(2, index, region.reshape(n, 3, -1))


def _render(p: dict[str, torch.Tensor], size: int, noise: torch.Tensor) -> torch.Tensor:
    """Draw one chunk: (B, 3, S, S) float in [0, 255.5), to be truncated to uint8 (= rounded).

    `noise` is a pool of pixel-noise fields on the 0..255 scale; one per image would cost
    more than everything else together.
    """
    n = p["ax"].numel()
    centred = (torch.arange(size, dtype=torch.float32) + 0.5) / size - 0.5
    shade = p["shade_x"].view(n, 1, 1) * centred.view(1, 1, size) + p["shade_y"].view(n, 1, 1) * centred.view(
        1, size, 1
    )
    # +0.5 so that the final truncation to uint8 rounds.
    image = (p["background"] * 255 + 0.5).view(n, 3, 1, 1) + (shade * 255).unsqueeze(1)
    _paint(image, p["ax"], p["ay"], p["ra"], p["colour_a"] * 255 + 0.5, _DISC_RADIUS[1], disc=True)
    _paint(image, p["bx"], p["by"], p["rb"], p["colour_b"] * 255 + 0.5, _SQUARE_HALF[1], disc=False)
    pool, full = noise.shape[0], n - n % noise.shape[0]
    # Image i gets noise field i % pool: one broadcast add, no gather.
    image[:full].view(-1, pool, 3, size, size).add_(noise)
    image[full:] += noise[: n - full]
    return image.clamp_(0, 255)


def generate(n: int, size: int, num_classes: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """n images (uint8, (n, 3, size, size)) and labels, deterministic for the arguments."""
    params = _params(n, num_classes, seed)
    gen = torch.Generator().manual_seed(seed + 7919)
    noise = torch.randn(_NOISE_POOL, 3, size, size, generator=gen).mul_(0.06 * 255)
    images = torch.empty(n, 3, size, size, dtype=torch.uint8)
    chunk = _NOISE_POOL * max(1, _PIXELS_PER_CHUNK // (size * size * _NOISE_POOL))
    for start in range(0, n, chunk):
        part = {k: v[start : start + chunk] for k, v in params.items() if k != "labels"}
        images[start : start + chunk].copy_(_render(part, size, noise))  # float -> uint8 truncates
    return images, params["labels"]


def load_synthetic(config: DataConfig) -> Source:
    """Sizes: num_train/num_val/num_test (default 4096/1024/2048) at source_size (default: resolution).

    Train and val are fresh draws seeded by `split_seed` (an i.i.d. validation set, which is
    what a hold-out of train approximates); test is drawn from a seed no split_seed reaches.
    """
    size = config.source_size or config.resolution
    k = config.num_classes
    train_x, train_y = generate(config.num_train or DEFAULT_TRAIN, size, k, 2 * config.split_seed)
    val_x, val_y = generate(config.num_val or DEFAULT_VAL, size, k, 2 * config.split_seed + 1)
    test_x, test_y = generate(config.num_test or DEFAULT_TEST, size, k, TEST_SEED)
    names = [f"dir{i}_{round(360 * i / k)}deg" for i in range(k)]
    return Source(
        train_x, train_y, test_x, test_y, names, hflip=False, crop_padding=size // 16,
        val_images=val_x, val_labels=val_y,
    )  # fmt: skip
