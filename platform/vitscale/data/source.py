"""`Source`: what a data set loader returns — raw uint8 tensors on the CPU plus its defaults.

Loaders stay simple (read files, label): they return the training split and the test split
(the official one where it exists, else a fixed hold-out that no seed moves). The
validation split is carved out of the training split by `vitscale.data.load` (seeded,
stratified, `data.val_fraction`), the same way for every data set; a loader that can
draw fresh i.i.d. samples (synthetic) may return its own `val_*` instead. A set that can also
be streamed (`data.loader: stream`) gives its index (`samples.StreamSource`), and
`resident_source` decodes it whole.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from vitscale.data.decode import decode_sample
from vitscale.data.samples import StreamSource


@dataclass
class Source:
    train_images: torch.Tensor  # uint8 (N, C, H, W), CPU
    train_labels: torch.Tensor  # int64 (N,)
    test_images: torch.Tensor
    test_labels: torch.Tensor
    class_names: list[str]
    hflip: bool  # does a horizontal flip keep the class?
    crop_padding: int  # default random-crop padding in source pixels
    val_images: torch.Tensor | None = None  # None: load() holds out data.val_fraction of train
    val_labels: torch.Tensor | None = None

    def __post_init__(self) -> None:
        for name in ("train", "val", "test"):
            images, labels = getattr(self, f"{name}_images"), getattr(self, f"{name}_labels")
            if name == "val" and images is None:
                continue
            if images.dtype != torch.uint8 or images.dim() != 4:
                raise ValueError(
                    f"{name}_images must be uint8 (N, C, H, W), got {images.dtype} {tuple(images.shape)}"
                )
            if labels.dtype != torch.int64 or labels.shape != (images.shape[0],):
                raise ValueError(f"{name}_labels must be int64 ({images.shape[0]},), got {labels.dtype}")
            if images.shape[1:] != self.train_images.shape[1:]:
                raise ValueError(f"train and {name} images differ in shape")


def stack_images(arrays: list[np.ndarray], grey: bool) -> torch.Tensor:
    """uint8 (N, C, H, W) of decoded (H, W) / (H, W, 3) arrays: one channel if the whole set is
    grey, else grey images repeated to RGB."""
    if grey:
        return torch.from_numpy(np.stack(arrays)[:, None])
    rgb = [np.repeat(a[..., None], 3, axis=2) if a.ndim == 2 else a for a in arrays]
    return torch.from_numpy(np.stack(rgb).transpose(0, 3, 1, 2).copy())


def resident_source(src: StreamSource, size: int, what: str) -> Source:
    """Every image of a streamable set decoded into memory (`data.loader: memory`): the same
    index, order and decoding as streaming it, so both loaders give the same pixels. A set whose
    images are all greyscale stays one channel; one colour image makes the whole set RGB."""
    train = [decode_sample(src.train, i, size, what) for i in range(len(src.train))]
    test = [decode_sample(src.test, i, size, what) for i in range(len(src.test))]
    images = stack_images(train + test, all(a.ndim == 2 for a in train + test))
    return Source(
        train_images=images[: len(train)],
        train_labels=torch.from_numpy(src.train.labels.astype(np.int64)),
        test_images=images[len(train) :],
        test_labels=torch.from_numpy(src.test.labels.astype(np.int64)),
        class_names=list(src.class_names),
        hflip=src.hflip,
        crop_padding=src.crop_padding,
    )
