"""`digits`: scikit-learn's bundled 8x8 handwritten digits (1797 real images, no download).

There is no official test split: a fixed stratified fifth (seed TEST_SEED, never moved by
`split_seed`) is the test set, so every trial of every study reports on the same images.
"""

from __future__ import annotations

import gzip
import importlib.util
from pathlib import Path

import numpy as np
import torch

from vitscale.data.config import DataConfig
from vitscale.data.source import Source
from vitscale.data.splits import stratified_split

TEST_FRACTION = 0.2
TEST_SEED = 20_611  # fixed: the test images are the same for every split_seed


# 1,295 training images: small batches and a higher peak lr give enough steps to converge;
# no label smoothing (it caps the confidence a 10-class model reaches on so few steps).


def bundled_csv() -> Path | None:
    """scikit-learn's own copy of the data (`sklearn/datasets/data/digits.csv.gz`), found without
    importing scikit-learn; None where that copy is not where it was."""
    spec = importlib.util.find_spec("sklearn")
    for folder in (spec and spec.submodule_search_locations) or ():
        path = Path(folder) / "datasets" / "data" / "digits.csv.gz"
        if path.is_file():
            return path
    return None


def digits_arrays() -> tuple[np.ndarray, np.ndarray]:
    """(images (1797, 8, 8) float64 grey levels 0..16, labels int64): what
    `sklearn.datasets.load_digits` returns, read as it reads them (np.loadtxt of the bundled CSV,
    last column the label) without importing scikit-learn, 1.7 s of CPU in every trial worker."""
    path = bundled_csv()
    if path is None:  # another layout: scikit-learn's own loader
        from sklearn.datasets import load_digits as sk_load_digits

        data = sk_load_digits()
        return data.images, data.target.astype(np.int64)
    with gzip.open(path, mode="rt", encoding="utf-8") as handle:
        table = np.loadtxt(handle, delimiter=",")
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(np.int64)


def load_digits(config: DataConfig) -> Source:
    """Grey levels 0..16 -> uint8 0..255, one channel; train and the fixed test hold-out."""
    grey, target = digits_arrays()
    images = torch.from_numpy(grey).mul(255.0 / 16.0).round().clamp(0, 255).to(torch.uint8)
    images = images.unsqueeze(1).contiguous()  # (N, 1, 8, 8)
    labels = torch.from_numpy(target).to(torch.int64)
    train_idx, test_idx = stratified_split(labels, TEST_FRACTION, TEST_SEED)
    return Source(
        train_images=images[train_idx],
        train_labels=labels[train_idx],
        test_images=images[test_idx],
        test_labels=labels[test_idx],
        class_names=[str(d) for d in range(10)],
        hflip=False,  # a mirrored 2, 3, 7 or 9 is no digit
        crop_padding=0,  # a 1-pixel shift of an 8x8 digit costs ~30 points of top-1 in 20 epochs
    )
