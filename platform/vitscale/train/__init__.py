"""One trial's training: `fit(TrialConfig)` -> per-epoch reports, checkpoints, final metrics."""

from vitscale.train.config import TrainConfig, TrialConfig
from vitscale.train.loop import FitResult, fit
from vitscale.train.metrics import REPORTED_METRICS

__all__ = ["REPORTED_METRICS", "FitResult", "TrainConfig", "TrialConfig", "fit"]
