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
from vitscale.train.distributed import ONE_PROCESS, Distributed
from vitscale.train.metrics import DID_NOT_TRAIN_MARGIN


@torch.inference_mode()
def evaluate(
    runner,
    bundle,
    config: TrialConfig,
    autocast=nullcontext(),
    split: str = "val",
    predicted: list[torch.Tensor] | None = None,
    distributed: Distributed = ONE_PROCESS,
) -> dict:
    """`{split}_loss` (no smoothing), `{split}_top1`, `{split}_top5` as fractions; `{split}_nfe_mean`
    when the model counts vector-field evaluations (ODE). `predicted`, when given, receives each
    batch's predicted classes (CPU int64, in split order): per-image results for paired tests.
    A worker of a data-parallel trial reads its block of the split (`distributed.span`) and the
    sums are all-reduced: every worker returns the whole split's numbers."""
    runner.eval()
    batch_size = config.train.eval_batch_size or 2 * config.train.batch_size
    device = bundle.val_labels.device
    loss_sum = torch.zeros((), device=device)
    top1 = torch.zeros((), device=device)
    top5 = torch.zeros((), device=device)
    count, nfe, batches = 0, 0, 0
    k = min(5, bundle.num_classes)
    rows = distributed.span(int(getattr(bundle, f"{split}_labels").numel()))
    for images, labels in vdata.eval_batches(bundle, config.data, batch_size, split=split, rows=rows):
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
    if distributed.active:  # one all-reduce of every sum: the whole split's numbers on each worker
        counts = torch.tensor([count, nfe, batches], dtype=torch.float64, device=device)
        sums = distributed.sum(torch.cat([torch.stack([loss_sum, top1, top5]).double(), counts]))
        loss_sum, top1, top5 = sums[0], sums[1], sums[2]
        count, nfe, batches = (int(v) for v in sums[3:].tolist())
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


def split_predictions(
    runner, bundle, config: TrialConfig, autocast, split: str, distributed: Distributed = ONE_PROCESS
) -> tuple[dict, dict]:
    """(metrics of `evaluate`, {index, label, predicted} numpy arrays over the whole split): one
    pass gives both, so the per-image record is exactly what the metrics counted (a data-parallel
    trial's workers each predict their block; the blocks are gathered in split order)."""
    predicted: list[torch.Tensor] = []
    metrics = evaluate(
        runner, bundle, config, autocast, split=split, predicted=predicted, distributed=distributed
    )
    labels = getattr(bundle, f"{split}_labels").to("cpu", torch.int64).numpy()
    mine = torch.cat(predicted).numpy() if predicted else labels[:0]
    classes = distributed.gather(mine)
    return metrics, {"index": np.arange(len(labels)), "label": labels, "predicted": classes}
