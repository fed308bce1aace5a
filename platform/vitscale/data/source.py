"""`Source`: what a data set loader returns — raw uint8 tensors on the CPU plus its defaults.

Loaders stay simple (read files, label, split); `vitscale.data.load` does the rest
(caps, statistics, moving to the device) once for all of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass
class Source:
    train_images: torch.Tensor  # uint8 (N, C, H, W), CPU
    train_labels: torch.Tensor  # int64 (N,)
    val_images: torch.Tensor
    val_labels: torch.Tensor
    class_names: list[str]
    hflip: bool  # does a horizontal flip keep the class?
    crop_padding: int  # default random-crop padding in source pixels

    def __post_init__(self) -> None:
        for name in ("train", "val"):
            images, labels = getattr(self, f"{name}_images"), getattr(self, f"{name}_labels")
            if images.dtype != torch.uint8 or images.dim() != 4:
                raise ValueError(
                    f"{name}_images must be uint8 (N, C, H, W), got {images.dtype} {tuple(images.shape)}"
                )
            if labels.dtype != torch.int64 or labels.shape != (images.shape[0],):
                raise ValueError(f"{name}_labels must be int64 ({images.shape[0]},), got {labels.dtype}")
        if self.train_images.shape[1:] != self.val_images.shape[1:]:
            raise ValueError("train and val images differ in shape")
