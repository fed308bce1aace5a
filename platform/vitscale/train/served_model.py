"""A trained model as others use it: the data set's uint8 images in, logits out.

Evaluation resizes each batch to the trial's resolution and normalises it with the training split's
per-channel statistics (`data.augment.prepare_batch`) before the model sees it. `ServedClassifier`
carries both, so the MLflow Model a trial logs (`tracking.logged_model`) needs nothing of the data
set to be used: `model(images)` on the test split's images gives the logits evaluation counted.
`save_served_model` writes it beside a trial's final checkpoint, with the first test image as
the input example; it is saved on the CPU, with float32 weights.
"""

from __future__ import annotations

import copy
import logging
import pickle
import shutil
from pathlib import Path

import cloudpickle
import numpy as np
import torch
from torch import nn

from vitscale.data.augment import prepare_batch
from vitscale.data.batches import Bundle
from vitscale.models import regions
from vitscale.precision import autocast
from vitscale.tracking.layout import INPUT_EXAMPLE_FILE, SERVED_DIR, SERVED_MODEL_FILE

log = logging.getLogger("vitscale.train")


class ServedClassifier(nn.Module):
    """`classifier` behind evaluation's preprocessing: uint8 (or 0..255 float) images (N, C, H, W)
    of any size -> float32 logits (N, classes), in the precision the trial evaluated in
    (`train.precision` as resolved: bfloat16 autocast or float32), so its argmax on the test split
    is the trial's test top-1."""

    def __init__(
        self,
        classifier: nn.Module,
        resolution: int,
        mean: tuple[float, ...],
        std: tuple[float, ...],
        precision: str = "float32",
    ) -> None:
        super().__init__()
        self.classifier = classifier
        self.resolution = int(resolution)
        self.mean, self.std = tuple(map(float, mean)), tuple(map(float, std))
        self.precision = precision

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        device = next(self.classifier.parameters()).device
        batch = prepare_batch(images.to(device), self.resolution, self.mean, self.std)
        with autocast(self.precision, device):
            return self.classifier(batch).float()


def save_served_model(
    directory: Path, model: nn.Module, bundle: Bundle, resolution: int, precision: str
) -> Path | None:
    """`directory/served/model.pt` (a CPU copy of `model` behind the preprocessing, in eval mode)
    and `directory/served/input_example.npy` (the first test image, uint8 (1, C, H, W)). A model
    that cannot be pickled is left out with a warning: the trial it ends is not failed for it."""
    folder = Path(directory) / SERVED_DIR
    folder.mkdir(parents=True, exist_ok=True)
    classifier = copy.deepcopy(model).to("cpu", torch.float32).eval()
    regions.uncompile(classifier)  # served eagerly: no compiler where it is loaded
    served = ServedClassifier(classifier, resolution, bundle.mean, bundle.std, precision).eval()
    try:
        torch.save(served, folder / SERVED_MODEL_FILE, pickle_module=cloudpickle)
    except (pickle.PicklingError, TypeError, AttributeError) as exc:
        shutil.rmtree(folder, ignore_errors=True)
        log.warning("the trained model is not saved for MLflow (%s: %s)", type(exc).__name__, exc)
        return None
    split = "test" if len(bundle.test_labels) else "val"
    example, _ = next(bundle.batches(split, [slice(0, 1)]))  # resident or streamed from disk alike
    np.save(folder / INPUT_EXAMPLE_FILE, example.to("cpu").numpy())
    return folder
