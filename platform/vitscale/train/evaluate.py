"""Evaluation of a model on one split: loss, top-1/top-5 and, for ODE models, the NFE it took.

The same function reads validation every epoch (what selection sees) and test once at the
end of a finished trial (what is reported). `did_not_train` flags a finished model whose
validation accuracy stayed at chance, so summaries can count it instead of averaging it in.
"""

from __future__ import annotations

import math
from contextlib import nullcontext

import numpy as np
import torch
import torch.nn.functional as F

from vitscale import data as vdata
from vitscale.train.config import TrialConfig
from vitscale.train.metrics import DID_NOT_TRAIN_MARGIN


@torch.inference_mode()
def evaluate(
    runner,
    bundle,
    config: TrialConfig,
    autocast=nullcontext(),
    split: str = "val",
    predicted: list[torch.Tensor] | None = None,
) -> dict:
    """`{split}_loss` (no smoothing), `{split}_top1`, `{split}_top5` as fractions; `{split}_nfe_mean`
    when the model counts vector-field evaluations (ODE). `predicted`, when given, receives each
    batch's predicted classes (CPU int64, in split order): per-image results for paired tests."""
    runner.eval()
    batch_size = config.train.eval_batch_size or 2 * config.train.batch_size
    device = bundle.val_labels.device
    loss_sum = torch.zeros((), device=device)
    top1 = torch.zeros((), device=device)
    top5 = torch.zeros((), device=device)
    count, nfe, batches = 0, 0, 0
    k = min(5, bundle.num_classes)
    for images, labels in vdata.eval_batches(bundle, config.data, batch_size, split=split):
        with autocast:
            logits = runner(images).float()
        loss_sum += F.cross_entropy(logits, labels, reduction="sum")
        best = logits.topk(k, dim=1).indices
        if predicted is not None:
            predicted.append(best[:, 0].to("cpu", torch.int64))
        hits = best == labels[:, None]
        top1 += hits[:, 0].sum()
        top5 += hits.any(dim=1).sum()
        count += len(labels)
        batches += 1
        nfe += getattr(runner, "last_nfe", None) or 0
    count = max(count, 1)
    loss = (loss_sum / count).item()
    out = {
        f"{split}_loss": loss if math.isfinite(loss) else float("nan"),
        f"{split}_top1": (top1 / count).item(),
        f"{split}_top5": (top5 / count).item(),
    }
    if nfe:
        out[f"{split}_nfe_mean"] = nfe / max(batches, 1)
    return out


def did_not_train(val_top1: float, num_classes: int) -> bool:
    """Within DID_NOT_TRAIN_MARGIN of chance (1 / classes), or not a number."""
    return not val_top1 > 1.0 / num_classes + DID_NOT_TRAIN_MARGIN


def split_predictions(runner, bundle, config: TrialConfig, autocast, split: str) -> tuple[dict, dict]:
    """(metrics of `evaluate`, {index, label, predicted} numpy arrays over the whole split): one
    pass gives both, so the per-image record is exactly what the metrics counted."""
    predicted: list[torch.Tensor] = []
    metrics = evaluate(runner, bundle, config, autocast, split=split, predicted=predicted)
    labels = getattr(bundle, f"{split}_labels").to("cpu", torch.int64).numpy()
    classes = torch.cat(predicted).numpy() if predicted else labels[:0]
    return metrics, {"index": np.arange(len(labels)), "label": labels, "predicted": classes}
