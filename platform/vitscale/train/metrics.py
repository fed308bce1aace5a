"""The metrics `fit` reports: the contract between trainer, study spec, tracking and analysis.

Selection (ASHA, samplers, "best", Pareto sets) may only read EPOCH_METRICS and
STATIC_METRICS: they are measured on the training and validation splits. The test metrics
(`test_loss`, `test_top1`, `test_top5`) are measured once on the test split, in the last epoch's
report of a trial that ran all its planned epochs, and are only ever reported. `at_resolution` names a metric measured at another
input resolution (`test_top1_at56`; MLflow refuses '@' in metric names): never selectable either.
MLflow holds STATIC_METRICS as params and leaves `epoch` (its steps) and `did_not_train` (a tag)
out of the metrics (`tracking.layout`); Tune sees every one of them.
"""

from vitscale.tracking.layout import CONSTANT_METRICS

EPOCH_METRICS = (
    "epoch",
    "train_loss",
    "val_loss",
    "val_top1",
    "val_top5",
    "lr",
    "epoch_seconds",
    "train_images_per_second",
    "images_seen",  # training images processed by the end of this epoch (every batch, at any side)
    "train_flops",  # training FLOPs (forward + backward) by the end of this epoch: train.cost
    "nfe_mean",  # ODE: mean vector-field evaluations per training forward (adjoint backward: nfe_backward_mean)
    "val_nfe_mean",  # ODE: mean vector-field evaluations per validation forward
    "peak_memory_mb",  # CUDA: peak allocated this epoch; CPU: the process's peak RSS so far
)
STATIC_METRICS = CONSTANT_METRICS  # params, flops_per_image (ODE: one field evaluation x val NFE), world_size
SELECTABLE_METRICS = EPOCH_METRICS + STATIC_METRICS
REPORTED_METRICS = SELECTABLE_METRICS
# A finished trial whose final val_top1 is within this of chance (1 / classes) did not train.
DID_NOT_TRAIN_MARGIN = 0.02


def at_resolution(metric: str, resolution: int) -> str:
    """'test_top1' measured on images resampled to 56 x 56 -> 'test_top1_at56'."""
    return f"{metric}_at{int(resolution)}"
