"""`Source`: what a data set loader returns — raw uint8 tensors on the CPU plus its defaults.

Loaders stay simple (read files, label): they return the training split and the test split
(the official one where it exists, else a fixed hold-out that no seed moves). The
validation split is carved out of the training split by `vitscale.data.load` (seeded,
stratified, `data.val_fraction`), the same way for every data set; a loader that can
draw fresh i.i.d. samples (synthetic) may return its own `val_*` instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


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
