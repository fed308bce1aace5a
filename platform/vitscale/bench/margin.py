"""When a ratio between two configurations is a finding: only beyond the spread of what it divides.

A ratio r = candidate / baseline says "ahead" or "behind" only where |ln r| exceeds ln(1 + margin),
the margin being the sum of both sides' relative spreads, never below MIN_MARGIN. A side's spread
is the larger of what was measured for it: the timed repeats' interquartile range over their median
(`latency_spread`, see bench.timing) and, over seeds, the 95 % interval's half-width over the mean.
Within the margin the two are tied (0.9999× is a tie, not "ahead"). A side with no spread at all
(one repeat, one seed) leaves the margin unknown and the verdict undecided: a single timing cannot
tell a difference from noise. Peak memory has no repeats: its spread is over seeds, else 0, so its
margin is at least MIN_MARGIN.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

MIN_MARGIN = 0.01  # ratios within 1 % are ties whatever the spreads: no report should rank on less
VERDICTS = ("ahead", "behind", "tied", "undecided")


def side_spread(spreads: Iterable[float | None]) -> float | None:
    """The largest finite, non-negative spread of one side; None when it has none."""
    found = [float(s) for s in spreads if s is not None and math.isfinite(s) and s >= 0]
    return max(found) if found else None


def ratio_margin(candidate: float | None, baseline: float | None) -> float | None:
    """The relative margin a ratio of the two must beat; None when either side has no spread."""
    if candidate is None or baseline is None:
        return None
    return max(MIN_MARGIN, candidate + baseline)


def verdict(ratio: float | None, margin: float | None, higher_is_better: bool = True) -> str:
    """'ahead' | 'behind' | 'tied' | 'undecided' for the candidate at ratio r = candidate / baseline."""
    if ratio is None or not math.isfinite(ratio) or ratio <= 0 or margin is None:
        return "undecided"
    advantage = math.log(ratio) if higher_is_better else -math.log(ratio)
    if abs(advantage) <= math.log1p(margin):
        return "tied"
    return "ahead" if advantage > 0 else "behind"
