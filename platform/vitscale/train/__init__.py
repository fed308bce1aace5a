"""One trial's training: `fit(TrialConfig)` -> per-epoch reports, checkpoints, final metrics.

`fit` is imported lazily so that reading configs (the study spec) does not import the models.
"""

from vitscale.train.config import TrainConfig, TrialConfig
from vitscale.train.metrics import REPORTED_METRICS

__all__ = ["REPORTED_METRICS", "FitResult", "TrainConfig", "TrialConfig", "fit"]


def __getattr__(name: str):
    if name in ("fit", "FitResult"):
        from vitscale.train import loop

        return getattr(loop, name)
    raise AttributeError(name)
