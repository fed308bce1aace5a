"""The gap between two mixers along the compute-optimal frontier, per regime: Δ error*(C) =
candidate − reference (reference: the registry's BASELINE) at matched training compute, over the
compute range both measured, and where the frontiers cross.

Basis "fitted law": both groups' laws were fitted; Δ from their fitted frontiers, its interval
from pairs of their bootstrap draws (independent groups: draw i of one with draw i of the other).
Basis "envelope": the measured envelopes, always shown beside the law where both have runs; its
interval from each group's own resamples (ComputePoints.resample). Δ is evaluated on N_GRID
log-spaced budgets; REPORT_EVERY-th of them go in the report's table.

A crossing is a sign change of the point Δ between neighbouring budgets (C located by
interpolating Δ in log C). It is *resolved* only when the interval excludes 0 with the earlier
sign at some budget before it and with the later sign at some budget after it (both interval
ends change sign); otherwise it is stated as "not resolved".
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from vitscale.analysis.statistics.fits import MIN_BOOT_OK

N_GRID = 41
REPORT_EVERY = 10  # budgets 0, 10, ..., 40 of the grid: five per gap


@dataclass
class GapRow:
    budget: float
    delta: float
    low: float | None = None
    high: float | None = None
    extrapolated: bool = False  # law basis: a frontier point here lies outside its measured N or D


@dataclass
class FrontierGap:
    regime: str
    candidate: str
    reference: str
    basis: str  # "fitted law" | "envelope"
    c_range: list[float] = field(default_factory=list)
    rows: list[GapRow] = field(default_factory=list)  # the report's budgets
    crossings: list[dict] = field(default_factory=list)  # budget, before / after sign, resolved
    statement: str = ""
    n_boot: int = 0  # resample pairs behind the intervals

    def to_dict(self) -> dict:
        return asdict(self)


def common_range(c_cand: np.ndarray, c_ref: np.ndarray) -> list[float] | None:
    lo, hi = max(c_cand.min(), c_ref.min()), min(c_cand.max(), c_ref.max())
    return [float(lo), float(hi)] if hi > lo else None


def _interval(draws: np.ndarray | None, level: float) -> tuple[np.ndarray, np.ndarray]:
    """Per budget the percentile interval of the draws (NaN where fewer than MIN_BOOT_OK are finite)."""
    k = draws.shape[1] if draws is not None else N_GRID
    if draws is None or draws.shape[0] < MIN_BOOT_OK:
        return np.full(k, np.nan), np.full(k, np.nan)
    q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
    finite = np.isfinite(draws).sum(axis=0) >= MIN_BOOT_OK
    with np.errstate(all="ignore"):
        lo, hi = np.nanpercentile(np.where(finite, draws, 0.0), q, axis=0)
    return np.where(finite, lo, np.nan), np.where(finite, hi, np.nan)


def _clear(sign: int, low: np.ndarray, high: np.ndarray) -> np.ndarray:
    """Where the interval excludes 0 on the side of `sign`."""
    return (low > 0) if sign > 0 else (high < 0)


def _crossings(grid: np.ndarray, delta: np.ndarray, low: np.ndarray, high: np.ndarray) -> list[dict]:
    sign = np.sign(delta)
    out = []
    for i in np.flatnonzero((sign[:-1] * sign[1:]) < 0):
        t = delta[i] / (delta[i] - delta[i + 1])
        at = float(np.exp(np.log(grid[i]) + t * (np.log(grid[i + 1]) - np.log(grid[i]))))
        before, after = int(sign[i]), int(sign[i + 1])
        resolved = bool(
            np.any(_clear(before, low[: i + 1], high[: i + 1]))
            and np.any(_clear(after, low[i + 1 :], high[i + 1 :]))
        )
        out.append({"budget": at, "before": before, "after": after, "resolved": resolved})
    return out


def _statement(gap: FrontierGap, delta: np.ndarray) -> str:
    lo, hi = gap.c_range
    span = f"{lo:.3g}–{hi:.3g} FLOPs"
    if not gap.crossings:
        side = "below" if np.all(delta < 0) else "above" if np.all(delta > 0) else "level with"
        return f"no crossing over {span}: {gap.candidate} {side} {gap.reference} throughout"
    parts = []
    for c in gap.crossings:
        turn = "below → above" if c["before"] < 0 else "above → below"
        how = (
            "resolved (the interval excludes 0 on both sides)"
            if c["resolved"]
            else "not resolved (the interval includes 0 on one side)"
        )
        parts.append(f"cross near {c['budget']:.3g} FLOPs ({gap.candidate} {turn} {gap.reference}), {how}")
    return "the frontiers " + "; ".join(parts)


def frontier_gap(
    gap: FrontierGap,
    grid: np.ndarray,
    delta: np.ndarray,
    draws: np.ndarray | None,
    extrapolated: np.ndarray | None = None,
    level: float = 0.95,
) -> FrontierGap:
    """Fill `gap` from the point Δ on `grid` and its bootstrap draws (resamples x budgets)."""
    low, high = _interval(draws, level)
    gap.n_boot = 0 if draws is None else int(draws.shape[0])
    extrapolated = np.zeros(grid.size, dtype=bool) if extrapolated is None else extrapolated
    gap.rows = [
        GapRow(
            budget=float(grid[i]),
            delta=float(delta[i]),
            low=None if np.isnan(low[i]) else float(low[i]),
            high=None if np.isnan(high[i]) else float(high[i]),
            extrapolated=bool(extrapolated[i]),
        )
        for i in range(0, grid.size, REPORT_EVERY)
    ]
    gap.crossings = _crossings(grid, delta, low, high)
    gap.statement = _statement(gap, delta)
    return gap
