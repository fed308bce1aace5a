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
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from vitscale.analysis.statistics.compute_points import ComputePoints
from vitscale.analysis.statistics.data_law import DataLawFit


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
