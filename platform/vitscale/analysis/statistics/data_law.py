"""The parametric law error(N, D) = E + A/N^α + B/D^β (Hoffmann et al. 2022, approach 3), fitted as
Besiroglu et al. (2024) refit it: in log space, log err ≈ LSE(e, a − α·x, b − β·y) with
x = log(N/N0), y = log(D/D0) (N0, D0: the geometric means of the sizes and data levels, so the
optimiser sees numbers near 1), E = e^e, A = e^a·N0^α, B = e^b·D0^β; a Huber loss (δ = 1e-3) on
the log residuals; L-BFGS-B from a grid of starts, the best kept. Fitted on runs (each seed a point).

Five parameters need a design that can tell them apart, so the fit is *refused* (a reason, no
numbers) with fewer than MIN_SIZES = 6 distinct sizes N or MIN_LEVELS = 3 distinct data levels D.
What bounds its trust, reported beside it:
- `dof`: residual degrees of freedom, distinct (N, D) cells − 5 (seeds replicate a cell; they add
  no information about the law's shape).
- leave-one-size-out: refit without each size (from the whole grid of starts, never from the
  full-data optimum) and predict its cells' mean error: mean |log error| and RMSE in points.
- bootstrap (fixed seed): compute_points.ComputePoints.resample (seeds within cells, + test images
  where predictions exist); a resample that does not converge, or that lost the design (cases),
  counts as failed. Percentile intervals for E, A, B, α, β; the draws are kept (not serialised) so
  the frontier and the gaps between mixers carry the same uncertainty.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
from threadpoolctl import threadpool_limits

from vitscale.analysis.statistics.compute_points import ComputePoints
from vitscale.analysis.statistics.fits import C_MIN, HUBER_DELTA, MIN_BOOT_OK, best_of_starts

MIN_SIZES = 6
MIN_LEVELS = 3
N_PARAMS = 5
EXP_MAX = 5.0  # α, β upper bound
NAMES = ("E", "A", "B", "alpha", "beta")


@dataclass
class DataLawFit:
    """E + A/N^α + B/D^β with percentile intervals (`ci`), dof, LOSO error, or the refusal reason."""

    status: str  # "ok" | "refused" | "failed"
    n_runs: int
    n_sizes: int
    n_levels: int
    n_cells: int
    E: float | None = None
    A: float | None = None
    B: float | None = None
    alpha: float | None = None
    beta: float | None = None
    ci: dict[str, list[float]] = field(default_factory=dict)
    at_bound: list[str] = field(default_factory=list)
    dof: int = 0
    loso: list[dict] = field(default_factory=list)  # per held-out size: its cells' log and point errors
    loso_log_mae: float | None = None  # mean |log predicted − log observed| over held-out cells
    loso_rmse: float | None = None  # points of error
    n_boot: int = 0
    n_boot_ok: int = 0
    bootstrap: str | None = None
    bootstrap_note: str | None = None
    seed: int | None = None
    reason: str | None = None
    n_range: list[float] = field(default_factory=list)  # measured sizes [min, max]
    d_range: list[float] = field(default_factory=list)  # measured data levels [min, max]
    draws: np.ndarray | None = None  # bootstrap (E, A, B, α, β) rows

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def params(self) -> np.ndarray:
        return np.array([self.E, self.A, self.B, self.alpha, self.beta], dtype=float)

    def predict(self, n: np.ndarray, d: np.ndarray) -> np.ndarray:
        return law(self.params, np.asarray(n, dtype=float), np.asarray(d, dtype=float))

    def to_dict(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "draws"}


def law(p: np.ndarray, n: np.ndarray, d: np.ndarray) -> np.ndarray:
    """E + A/N^α + B/D^β for p = (E, A, B, α, β) (rows of p broadcast against n, d)."""
    p = np.asarray(p, dtype=float)
    return p[..., 0] + p[..., 1] * n ** -p[..., 3] + p[..., 2] * d ** -p[..., 4]


def _objective(theta: np.ndarray, x: np.ndarray, y: np.ndarray, ly: np.ndarray) -> tuple[float, np.ndarray]:
    """Huber loss of LSE(e, a − α·x, b − β·y) − log err and its gradient in (e, a, b, α, β)."""
    e, a, b, alpha, beta = theta
    t1, t2 = a - alpha * x, b - beta * y
    top = np.maximum(np.maximum(t1, t2), e)
    z0, z1, z2 = np.exp(e - top), np.exp(t1 - top), np.exp(t2 - top)
    total = z0 + z1 + z2
    r = top + np.log(total) - ly
    ar = np.abs(r)
    loss = np.where(ar <= HUBER_DELTA, 0.5 * r * r, HUBER_DELTA * (ar - 0.5 * HUBER_DELTA)).sum()
    g = np.clip(r, -HUBER_DELTA, HUBER_DELTA) / total  # Huber'(r) x d LSE / d term, over the softmax sum
    g1, g2 = g * z1, g * z2
    return float(loss), np.array([(g * z0).sum(), g1.sum(), g2.sum(), -(g1 @ x), -(g2 @ y)])


def _bounds(err: np.ndarray) -> list[tuple[float, float]]:
    top = math.log(max(float(err.max()), 2 * C_MIN))
    return [(math.log(C_MIN), top), (-30.0, 30.0), (-30.0, 30.0), (0.0, EXP_MAX), (0.0, EXP_MAX)]


def starts(err: np.ndarray) -> list[np.ndarray]:
    """A grid of 24 initialisations: floors 5 / 50 / 90 % of the smallest error, the rest split
    30/70 or 70/30 between the two terms at the geometric-mean size and data level, exponents
    0.25 or 0.75 each. With N and D normalised, on the tests' synthetic data every start ends at the
    same optimum; the grid is there for the data where they would not."""
    out, mean = [], float(np.exp(np.log(err).mean()))
    for f0, share, a0, b0 in itertools.product((0.05, 0.5, 0.9), (0.3, 0.7), (0.25, 0.75), (0.25, 0.75)):
        e0 = f0 * float(err.min())
        rest = max(mean - e0, C_MIN)
        out.append(np.array([math.log(e0), math.log(share * rest), math.log((1 - share) * rest), a0, b0]))
    return out


def _fit(x: np.ndarray, y: np.ndarray, err: np.ndarray, inits: list[np.ndarray]) -> np.ndarray | None:
    """Best converged θ over the starts by the Huber loss; None if none converged."""
    return best_of_starts(_objective, inits, _bounds(err), (x, y, np.log(err)))


def _natural(theta: np.ndarray, n0: float, d0: float) -> np.ndarray:
    e, a, b, alpha, beta = theta
    return np.array([math.exp(e), math.exp(a) * n0**alpha, math.exp(b) * d0**beta, alpha, beta])


def _at_bound(theta: np.ndarray, err: np.ndarray, tol: float = 1e-4) -> list[str]:
    bounds, flags = _bounds(err), []
    for j, name in ((0, "E"), (3, "alpha"), (4, "beta")):
        if theta[j] <= bounds[j][0] + tol:
            flags.append(f"{name}=0 (lower bound)")
        if theta[j] >= bounds[j][1] - tol:
            flags.append(f"{name} at its upper bound")
    return flags


def _loso(pts: ComputePoints, x: np.ndarray, y: np.ndarray, n0: float, d0: float) -> list[dict]:
    """Per size: refit on the others from the grid, predict this size's cells' mean error."""
    out, cells = [], pts.cell_means()
    for v in pts.sizes:
        keep, at = pts.n != v, cells["n"] == v
        theta = _fit(x[keep], y[keep], pts.err[keep], starts(pts.err[keep]))
        row = {"params": float(v), "cells": int(at.sum()), "log_errors": None}
        if theta is not None:
            pred = law(_natural(theta, n0, d0), cells["n"][at], cells["d"][at])
            row["log_errors"] = [float(v) for v in np.log(pred) - np.log(cells["err"][at])]
            row["points"] = [float(v) for v in 100 * (pred - cells["err"][at])]
        out.append(row)
    return out


def _loso_summary(fit: DataLawFit) -> None:
    """Mean |log error| and RMSE (points) over every held-out cell of every refit that converged."""
    logs = [v for r in fit.loso if r["log_errors"] for v in r["log_errors"]]
    points = [v for r in fit.loso if r["log_errors"] for v in r["points"]]
    if logs:
        fit.loso_log_mae = float(np.mean(np.abs(logs)))
        fit.loso_rmse = float(np.sqrt(np.mean(np.square(points))))


def fit_data_law(
    pts: ComputePoints, *, n_boot: int, seed: int = 0, level: float = 0.95, loso: bool = True
) -> DataLawFit:
    """Fit the law to the group's runs, or refuse (module docstring); seeded: same input, same numbers.

    BLAS runs on one thread here: the problems are 5-dimensional, and OpenBLAS's threads on a busy
    machine made each L-BFGS-B step some 10x slower than a single thread.
    """
    with threadpool_limits(limits=1, user_api="blas"):
        return _fit_data_law(pts, n_boot, seed, level, loso)


def _fit_data_law(pts: ComputePoints, n_boot: int, seed: int, level: float, loso: bool) -> DataLawFit:
    fit = DataLawFit(
        status="refused",
        n_runs=int(pts.n.size),
        n_sizes=int(pts.sizes.size),
        n_levels=int(pts.levels.size),
        n_cells=len(pts.cells),
    )
    fit.dof = fit.n_cells - N_PARAMS
    fit.n_range = [float(pts.n.min()), float(pts.n.max())]
    fit.d_range = [float(pts.d.min()), float(pts.d.max())]
    if fit.n_sizes < MIN_SIZES or fit.n_levels < MIN_LEVELS:
        fit.reason = (
            f"refused: {fit.n_sizes} sizes and {fit.n_levels} data levels (E + A/N^α + B/D^β needs "
            f">= {MIN_SIZES} distinct sizes N and >= {MIN_LEVELS} distinct data levels D)"
        )
        return fit
    n0, d0 = float(np.exp(np.log(pts.sizes).mean())), float(np.exp(np.log(pts.levels).mean()))
    x, y = np.log(pts.n / n0), np.log(pts.d / d0)
    grid = starts(pts.err)
    best = _fit(x, y, pts.err, grid)
    if best is None:
        fit.status, fit.reason = "failed", "L-BFGS-B did not converge from any start"
        return fit
    fit.status = "ok"
    fit.E, fit.A, fit.B, fit.alpha, fit.beta = (float(v) for v in _natural(best, n0, d0))
    fit.at_bound = _at_bound(best, pts.err)
    if loso:
        fit.loso = _loso(pts, x, y, n0, d0)
        _loso_summary(fit)
    draws = _bootstrap(pts, x, y, best, grid, n_boot, seed)
    fit.n_boot, fit.n_boot_ok, fit.seed = n_boot, len(draws), seed
    fit.bootstrap, fit.bootstrap_note = pts.scheme, pts.image_note
    if len(draws) >= MIN_BOOT_OK:
        fit.draws = np.asarray([_natural(t, n0, d0) for t in draws])
        q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
        fit.ci = {k: [float(v) for v in np.percentile(fit.draws[:, j], q)] for j, k in enumerate(NAMES)}
    elif n_boot:
        fit.reason = f"no interval: {len(draws)} of {n_boot} bootstrap resamples succeeded"
    return fit


def _bootstrap(
    pts: ComputePoints,
    x: np.ndarray,
    y: np.ndarray,
    best: np.ndarray,
    grid: list[np.ndarray],
    n_boot: int,
    seed: int,
) -> list[np.ndarray]:
    """θ of each successful resample, warm-started at the full-data optimum (else the grid)."""
    rng, draws = np.random.default_rng(seed), []
    for _ in range(n_boot):
        idx, e = pts.resample(rng)
        if np.unique(pts.n[idx]).size < MIN_SIZES or np.unique(np.round(pts.d[idx])).size < MIN_LEVELS:
            continue  # the resample lost the design (cases): counted as failed
        got = _fit(x[idx], y[idx], e, [best])
        got = got if got is not None else _fit(x[idx], y[idx], e, grid)
        if got is not None:
            draws.append(got)
    return draws
