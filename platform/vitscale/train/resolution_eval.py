"""A trained model evaluated at other input resolutions: accuracy as a function of the token count.

The patch size stays fixed, so an image resampled to R x R gives (R / patch)² tokens. The images
are resized by the same `data.resolution` path every evaluation takes (`prepare_batch`), the
learned position embedding is resampled bicubically by the model itself (`vit.resample_pos_embed`,
as timm's `resample_abs_pos_embed`), and SSoG's kernels live on normalised grid coordinates, so
nothing else changes. Used at the end of a trial (`train.eval_resolutions`) and by `vitscale
evaluate` on a finished one; the metrics are `at_resolution` names and nothing selects on them.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import nullcontext

import numpy as np

from vitscale.tracking.predictions import predictions_name
from vitscale.train.config import TrialConfig
from vitscale.train.distributed import ONE_PROCESS, Distributed
from vitscale.train.evaluate import split_predictions
from vitscale.train.metrics import at_resolution

Predictions = dict[str, dict[str, np.ndarray]]  # file stem ('test@56') -> {index, label, predicted}


def at_resolution_config(config: TrialConfig, resolution: int) -> TrialConfig:
    """The trial's evaluation settings with images resampled to `resolution` (the model is not
    rebuilt: it is the one trained at `data.resolution`)."""
    return config.model_copy(update={"data": config.data.model_copy(update={"resolution": resolution})})


def evaluate_at_resolutions(
    runner,
    bundle,
    config: TrialConfig,
    resolutions: Sequence[int],
    splits: Sequence[str] = ("val", "test"),
    autocast=nullcontext(),
    distributed: Distributed = ONE_PROCESS,
) -> tuple[dict[str, float], Predictions]:
    """({'val_top1_at56': ..., 'test_loss_at56': ...}, {'test@56': arrays, ...}): one pass per
    split and resolution, so each per-image record is exactly what its metrics counted."""
    metrics: dict[str, float] = {}
    predictions: Predictions = {}
    for resolution in resolutions:
        at = at_resolution_config(config, resolution)
        for split in splits:
            stats, arrays = split_predictions(runner, bundle, at, autocast, split, distributed)
            metrics.update({at_resolution(k, resolution): v for k, v in stats.items()})
            predictions[predictions_name(split, resolution)] = arrays
    return metrics, predictions
