"""Whether an arm had stopped learning when it stopped training: a verdict between models that were
still improving compares budgets, not mixers, so every verdict says so beside it.

The rule reads an arm's mean validation curve (over its finished final-phase seeds) against images
seen: over the last quarter of training, a least-squares line through the evaluated points (from
the last one at or before the quarter's start) gives the top-1 gained across that quarter. More
than the threshold: *still improving*; else *converged*. A line, not last minus first, so one noisy
epoch at either end does not decide. Fewer than MIN_POINTS evaluated epochs: *undetermined*, never
converged by default.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vitscale.tracking.layout import arm_display

DEFAULT_THRESHOLD_POINTS = 0.5  # `vitscale analyze --converged-threshold`, points of top-1
LAST_SHARE = 0.25  # the window: this share of training, by images seen, at its end
MIN_POINTS = 4  # evaluated epochs below which the slope of a quarter is not judged
STILL_IMPROVING, CONVERGED, UNDETERMINED = "still improving", "converged", "undetermined"


@dataclass(frozen=True)
class Convergence:
    mark: str  # STILL_IMPROVING | CONVERGED | UNDETERMINED
    gain: float  # validation top-1 gained over the last quarter (fraction); NaN when undetermined
    points: int  # evaluated epochs of the mean curve
    reason: str = ""  # why undetermined


def judge_convergence(x: np.ndarray, y: np.ndarray, threshold: float) -> Convergence:
    """The mark of one mean curve: `x` images seen (or epochs) ascending, `y` validation top-1
    (fraction; NaN points are skipped), `threshold` the gain (fraction) above which it still improves."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y)
    x, y = x[ok], y[ok]
    if x.size < MIN_POINTS:
        epochs = f"{x.size} evaluated epoch{'' if x.size == 1 else 's'}"
        return Convergence(UNDETERMINED, float("nan"), int(x.size), f"{epochs}, needs {MIN_POINTS}")
    end = float(x.max())
    start = (1 - LAST_SHARE) * end
    before = x[x <= start]
    window = x >= (before.max() if before.size else x.min())
    slope = np.polyfit(x[window], y[window], 1)[0]
    gain = float(slope * LAST_SHARE * end)
    return Convergence(STILL_IMPROVING if gain > threshold else CONVERGED, gain, int(x.size))


def convergence_note(arms: list[str], marks: dict[str, Convergence], mark: str = STILL_IMPROVING) -> str:
    """'still improving: ssog · ode' for the arms (labels) of one verdict that carry `mark`, else ''."""
    named = [arm_display(a) for a in arms if a in marks and marks[a].mark == mark]
    return f"{mark}: {', '.join(named)}" if named else ""
