"""Spearman's rank correlation: does a ranking made at low fidelity hold at full fidelity?

A comparison that tunes at `search.fidelity` re-runs each arm's top points at full fidelity
(`tune.confirmation`); ρ between the two sets of validation scores says whether the cheap ranking
transferred (1: the same order, 0: none, −1: reversed). Ties take their average rank (ρ is then the
Pearson correlation of the ranks). Below `MIN_POINTS` points, or when every score of one side ties,
ρ is undefined and `note` says why: two points always correlate ±1, which says nothing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

MIN_POINTS = 3


@dataclass(frozen=True)
class RankCorrelation:
    rho: float | None  # None: undefined (see note)
    n: int  # points with both scores
    note: str = ""  # why rho is undefined ("n = 2 < 3"); "" when it is defined


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, smallest first; tied values share the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for j in range(start, end + 1):
            ranks[order[j]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(
    xs: Sequence[float], ys: Sequence[float], names: tuple[str, str] = ("first", "second")
) -> RankCorrelation:
    """ρ of paired scores (same length); pairs where either score is missing or not finite are left
    out. `names` name the two sets in the note ("every low-fidelity score ties")."""
    pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if _finite(x) and _finite(y)]
    n = len(pairs)
    if n < MIN_POINTS:
        return RankCorrelation(None, n, f"n = {n} < {MIN_POINTS}")
    rx = average_ranks([x for x, _ in pairs])
    ry = average_ranks([y for _, y in pairs])
    mx, my = sum(rx) / n, sum(ry) / n
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return RankCorrelation(None, n, f"every {names[0] if sxx == 0 else names[1]} score ties")
    return RankCorrelation(max(-1.0, min(1.0, sxy / math.sqrt(sxx * syy))), n)


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
