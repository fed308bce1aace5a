"""One trial's training: `fit(TrialConfig)` -> per-epoch reports, checkpoints, final metrics.

The configs and metric names import without torch; `fit`, `logged_trial` and `trial_from_run` (a
logged run's trial, for `vitscale train --from-run`) load on first use, so validating a study never imports
torch (issue 30).
"""

from vitscale.lazy import lazy_exports
from vitscale.train.config import TrainConfig, TrialConfig
from vitscale.train.metrics import REPORTED_METRICS

# name -> the module that defines it, imported when the name is first read (see vitscale.lazy)
_TORCH_BACKED = {
    "FitResult": "vitscale.train.loop",
    "fit": "vitscale.train.loop",
    "logged_trial": "vitscale.train.from_mlflow",
    "trial_from_run": "vitscale.train.from_mlflow",
}

__getattr__ = lazy_exports(__name__, _TORCH_BACKED)


__all__ = [
    "REPORTED_METRICS",
    "FitResult",
    "TrainConfig",
    "TrialConfig",
    "fit",
    "logged_trial",
    "trial_from_run",
]
