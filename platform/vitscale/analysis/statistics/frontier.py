"""The compute-optimal frontier error*(C) of one mixer x regime: the lowest test error reachable
with training compute C.

- empirical envelope: over the (N, D) cells' seed means, the least error of any cell whose mean
  C is <= C (a step function: what was measured with at most that much compute).
- fitted frontier: min over N of E + A/N^α + B/D^β at D = C / cost(N), where cost(N) = κ·N^γ is
  the training FLOPs per image, fitted (log-log least squares) over the group's own runs — not
  6·N: a ViT's FLOPs per image depend on its tokens and mixer, not only its parameters. The
  minimum has a closed form, N* = (α·A / (γ·β·B·(C/κ)^-β))^(1/(α+γβ)), so N* ∝ C^(β/(α+γβ))
  (β/(α+β) for γ = 1).
- extrapolation: a frontier point is marked where C lies outside the measured compute, or N*
  outside the measured sizes, or D* outside the measured data levels; the figures draw it dashed.

The gap (frontier_gap) between two mixers along the compute-optimal frontier, per regime: Δ error*(C) =
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

from vitscale.analysis.statistics.compute_points import ComputePoints
from vitscale.analysis.statistics.data_law import DataLawFit
from vitscale.analysis.statistics.fits import MIN_BOOT_OK


@dataclass
class CostModel:
    """Training FLOPs per image = kappa · N^gamma, fitted on the group's runs."""

    kappa: float
    gamma: float

    def per_image(self, n: np.ndarray) -> np.ndarray:
        return self.kappa * np.asarray(n, dtype=float) ** self.gamma


def cost_model(pts: ComputePoints) -> CostModel | None:
    """log(C / D) = log κ + γ·log N by least squares; None with one size (γ unknown)."""
    if pts.sizes.size < 2:
        return None
    gamma, log_kappa = np.polyfit(np.log(pts.n), np.log(pts.c / pts.d), 1)
    return CostModel(kappa=float(np.exp(log_kappa)), gamma=float(gamma))


def envelope_at(budgets: np.ndarray, cell_c: np.ndarray, cell_err: np.ndarray) -> np.ndarray:
    """The empirical envelope at each budget: least cell error with C <= budget (NaN below every C)."""
    order = np.argsort(cell_c)
    best = np.minimum.accumulate(cell_err[order])
    at = np.searchsorted(cell_c[order], np.asarray(budgets, dtype=float), side="right") - 1
    return np.where(at >= 0, best[np.maximum(at, 0)], np.nan)


def envelope_steps(cell_c: np.ndarray, cell_err: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cells on the envelope (each lower than every cheaper one), by C."""
    order = np.argsort(cell_c)
    c, e = cell_c[order], cell_err[order]
    keep = e < np.r_[np.inf, np.minimum.accumulate(e)[:-1]]
    return c[keep], e[keep]


def optimal_size(params: np.ndarray, cost: CostModel, budgets: np.ndarray) -> np.ndarray:
    """N*(C) of the law (closed form, module docstring); rows of `params` broadcast over budgets.
    NaN where α or β is 0 (the optimum runs off to a bound)."""
    p = np.atleast_2d(np.asarray(params, dtype=float))[:, :, None]
    _, a_, b_, alpha, beta = (p[:, j] for j in range(5))
    c = np.asarray(budgets, dtype=float)[None, :]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = alpha * a_ / (cost.gamma * beta * b_ * (c / cost.kappa) ** -beta)
        n = scale ** (1.0 / (alpha + cost.gamma * beta))
    n = np.where((alpha > 0) & (beta > 0) & np.isfinite(n) & (n > 0), n, np.nan)
    return n if np.ndim(params) > 1 else n[0]


def law_frontier(params: np.ndarray, cost: CostModel, budgets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(error*, N*) at each budget for the law's parameters (rows broadcast as in optimal_size)."""
    n = optimal_size(params, cost, budgets)
    p = np.atleast_2d(np.asarray(params, dtype=float))[:, None, :]
    nn = np.atleast_2d(n)
    d = np.asarray(budgets, dtype=float)[None, :] / cost.per_image(nn)
    err = p[..., 0] + p[..., 1] * nn ** -p[..., 3] + p[..., 2] * d ** -p[..., 4]
    return (err, n) if np.ndim(params) > 1 else (err[0], n)


def optimal_exponent(params: np.ndarray, cost: CostModel) -> np.ndarray:
    """a in N* ∝ C^a implied by the law and the cost model: β / (α + γ·β)."""
    p = np.atleast_2d(np.asarray(params, dtype=float))
    return p[:, 4] / (p[:, 3] + cost.gamma * p[:, 4])


def _outside(v: np.ndarray, lo: float, hi: float, tol: float = 1e-9) -> np.ndarray:
    return ~((v >= lo * (1 - tol)) & (v <= hi * (1 + tol)))


def extrapolated(fit: DataLawFit, cost: CostModel, pts: ComputePoints, budgets: np.ndarray) -> np.ndarray:
    """True where the fitted frontier leaves the measured C, N or D range (module docstring)."""
    budgets = np.asarray(budgets, dtype=float)
    n = optimal_size(fit.params, cost, budgets)
    d = budgets / cost.per_image(n)
    return (
        _outside(budgets, pts.c.min(), pts.c.max())
        | _outside(n, *fit.n_range)
        | _outside(d, *fit.d_range)
        | ~np.isfinite(n)
    )


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
