"""The metrics `fit` reports every epoch: the contract between trainer, spec and analysis."""

EPOCH_METRICS = (
    "epoch",
    "train_loss",
    "val_loss",
    "val_top1",
    "val_top5",
    "lr",
    "epoch_seconds",
    "train_images_per_second",
    "nfe_mean",
)
STATIC_METRICS = ("params", "flops_per_image")
REPORTED_METRICS = EPOCH_METRICS + STATIC_METRICS
