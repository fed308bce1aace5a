"""One trial's training: `fit(TrialConfig)` -> per-epoch reports, checkpoints, final metrics.

The configs and metric names import without torch; `fit` loads on first use, so validating a
study never imports torch (issue 30).
"""

import importlib

from vitscale.train.config import TrainConfig, TrialConfig
from vitscale.train.metrics import REPORTED_METRICS

# name -> module that defines it (imported when the name is first read: import time matters here)
_TORCH_BACKED = {"FitResult": "vitscale.train.loop", "fit": "vitscale.train.loop"}


def __getattr__(name: str):
    if name in _TORCH_BACKED:
        return getattr(importlib.import_module(_TORCH_BACKED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["REPORTED_METRICS", "FitResult", "TrainConfig", "TrialConfig", "fit"]
