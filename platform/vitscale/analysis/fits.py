"""Scaling laws: error(P) = a·P^(-b) + c per mixer x regime, fitted only where the data carry it.

A 3-parameter law through 3 sizes is exactly determined (it passes through every size mean), so
a fit needs >= MIN_DISTINCT_P = 4 distinct parameter counts; with fewer the report says
"not fitted: N sizes" and gives no interval. The fit follows Besiroglu et al. (2024), "Chinchilla
scaling: a replication attempt": in log space, log err ≈ LSE(α − b·log x, γ) with a = e^α, c = e^γ,
a Huber loss (δ = 1e-3) on the log residuals, L-BFGS-B from a grid of initialisations, the best
kept. P is normalised by its geometric mean (x) so the optimiser sees numbers near 1. Parameters
that end on a bound are flagged. Bootstrap CIs resample runs with a fixed seed (within each size
when every size has >= 2 runs, else whole cases); resamples whose fit fails, or that keep fewer
than 4 sizes, are counted as failed, never silently dropped.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
from scipy.optimize import minimize
from scipy.special import expit

from vitscale.analysis.fields import as_float
from vitscale.analysis.outcomes import outcome_counts
from vitscale.models.registry import mixer_order, regime_order

MIN_DISTINCT_P = 4
N_BOOT = 1000
B_MAX = 5.0
C_MIN = 1e-6  # c's lower bound (c = 0 is not reachable in log space): c at C_MIN means "no floor"
HUBER_DELTA = 1e-3
MIN_BOOT_OK = 10  # fewer successful resamples than this: no interval


@dataclass
class PowerLawFit:
    """error(P) = a·P^(-b) + c; `ci` maps a/b/c to [2.5, 97.5] bootstrap percentiles."""

    status: str  # "ok" | "not_fitted" | "failed"
    n_runs: int
    n_distinct: int
    a: float | None = None
    b: float | None = None
    c: float | None = None
    ci: dict[str, list[float]] = field(default_factory=dict)
    at_bound: list[str] = field(default_factory=list)  # e.g. ["b=5 (upper)", "c=0 (lower)"]
    rmse: float | None = None
    loss: str = f"huber(delta={HUBER_DELTA}) on log error"
    n_starts: int = 0
    n_boot: int = 0
    n_boot_ok: int = 0
    bootstrap: str | None = None
    seed: int | None = None
    reason: str | None = None
    group: dict[str, str] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # outcomes of the group's runs (outcomes.py)

    def predict(self, p: np.ndarray) -> np.ndarray:
        return self.a * np.asarray(p, dtype=float) ** (-self.b) + self.c


def _objective(theta: np.ndarray, lx: np.ndarray, ly: np.ndarray) -> tuple[float, np.ndarray]:
    """Huber loss of LSE(α − b·lx, γ) − ly and its gradient in (α, b, γ)."""
    alpha, b, gamma = theta
    u = alpha - b * lx
    r = np.logaddexp(u, gamma) - ly
    w = expit(u - gamma)  # d LSE / d u
    small = np.abs(r) <= HUBER_DELTA
    loss = np.where(small, 0.5 * r**2, HUBER_DELTA * (np.abs(r) - 0.5 * HUBER_DELTA)).sum()
    g = np.clip(r, -HUBER_DELTA, HUBER_DELTA)
    return float(loss), np.array([(g * w).sum(), (-g * w * lx).sum(), (g * (1 - w)).sum()])


def _bounds(err: np.ndarray) -> list[tuple[float, float]]:
    return [(-50.0, 50.0), (0.0, B_MAX), (math.log(C_MIN), math.log(max(float(err.max()), 2 * C_MIN)))]


def _fit(x: np.ndarray, err: np.ndarray, starts: list[np.ndarray]) -> np.ndarray | None:
    """Best converged (α, b, γ) over the starts by the Huber loss; None if no start converged."""
    lx, ly, bounds = np.log(x), np.log(err), _bounds(err)
    lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    best, best_loss = None, np.inf
    for p0 in starts:
        res = minimize(
            _objective, np.clip(p0, lo, hi), args=(lx, ly), jac=True, method="L-BFGS-B", bounds=bounds
        )
        if res.success and np.all(np.isfinite(res.x)) and res.fun < best_loss:
            best, best_loss = res.x, float(res.fun)
    return best


def _starts(err: np.ndarray) -> list[np.ndarray]:
    """A grid of initialisations: exponents 0.1–2, floors 0 / half / nine tenths of the smallest error."""
    out = []
    for c0 in (C_MIN, 0.5 * float(err.min()), 0.9 * float(err.min())):
        amp = max(float(np.exp(np.log(err).mean())) - c0, C_MIN)  # at x = 1 (the geometric mean of P)
        for b0 in (0.1, 0.3, 0.6, 1.0, 2.0):
            out.append(np.array([math.log(amp), b0, math.log(max(c0, C_MIN))]))
    return out


def _at_bound(theta: np.ndarray, err: np.ndarray) -> list[str]:
    _, (b_lo, b_hi), (g_lo, g_hi) = _bounds(err)
    flags = []
    b, gamma = float(theta[1]), float(theta[2])
    if b <= b_lo + 1e-6:
        flags.append("b=0 (lower bound)")
    if b >= b_hi - 1e-6:
        flags.append(f"b={B_MAX:g} (upper bound)")
    if gamma <= g_lo + 1e-6:
        flags.append("c=0 (lower bound)")
    if gamma >= g_hi - 1e-6:
        flags.append("c=largest error (upper bound)")
    return flags


def fit_power_law(
    params: np.ndarray, error: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95
) -> PowerLawFit:
    """Fit error = a·P^(-b) + c with bootstrap percentile CIs (fixed seed: same input, same numbers)."""
    p, err = np.asarray(params, dtype=float), np.asarray(error, dtype=float)
    ok = np.isfinite(p) & np.isfinite(err) & (p > 0) & (err > 0)
    p, err = p[ok], err[ok]
    levels = np.unique(p)
    fit = PowerLawFit(status="not_fitted", n_runs=int(p.size), n_distinct=int(levels.size))
    if levels.size < MIN_DISTINCT_P:
        fit.reason = (
            f"not fitted: {levels.size} sizes (a 3-parameter law needs >= {MIN_DISTINCT_P} distinct sizes)"
        )
        return fit
    p0 = float(np.exp(np.log(levels).mean()))
    x = p / p0
    starts = _starts(err)
    fit.n_starts = len(starts)
    best = _fit(x, err, starts)
    if best is None:
        fit.status, fit.reason = "failed", "L-BFGS-B did not converge from any initialisation"
        return fit
    alpha, b, gamma = (float(v) for v in best)
    fit.status, fit.a, fit.b, fit.c = "ok", math.exp(alpha) * p0**b, b, math.exp(gamma)
    fit.at_bound = _at_bound(best, err)
    fit.rmse = float(np.sqrt(((fit.predict(p) - err) ** 2).mean()))
    rng = np.random.default_rng(seed)
    by_level = [np.flatnonzero(p == v) for v in levels]
    stratified = all(ix.size >= 2 for ix in by_level)
    draws = []
    for _ in range(n_boot):
        if stratified:
            idx = np.concatenate([rng.choice(ix, size=ix.size, replace=True) for ix in by_level])
        else:
            idx = rng.integers(0, p.size, p.size)
            if np.unique(p[idx]).size < MIN_DISTINCT_P:
                continue  # counted as failed: n_boot - n_boot_ok
        got = _fit(x[idx], err[idx], [best])  # warm start at the full-data optimum
        got = got if got is not None else _fit(x[idx], err[idx], starts)  # else the whole grid
        if got is not None:
            draws.append((math.exp(got[0]) * p0 ** got[1], got[1], math.exp(got[2])))
    fit.n_boot, fit.n_boot_ok, fit.seed = n_boot, len(draws), seed
    fit.bootstrap = "stratified" if stratified else "cases"
    if len(draws) >= MIN_BOOT_OK:
        arr = np.asarray(draws)
        q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
        fit.ci = {k: [float(v) for v in np.percentile(arr[:, j], q)] for j, k in enumerate("abc")}
    elif n_boot:
        fit.reason = f"no interval: {len(draws)} of {n_boot} bootstrap resamples succeeded"
    return fit


def scaling_fits(
    runs: pa.Table, *, n_boot: int = N_BOOT, seed: int = 0, on_group=None, final_only: bool = False
) -> list[PowerLawFit]:
    """One power-law fit per mixer x regime over the finished runs of a `with_outcomes` table
    (comparison studies: `final_only`, the tuned configurations, not the tuning trials)."""
    if "val_top1" not in runs.column_names or "params" not in runs.column_names:
        return []
    used = np.asarray(runs.column("used").to_pylist(), dtype=bool)
    scope = np.ones(runs.num_rows, dtype=bool)
    if final_only:
        scope = np.asarray([p == "final" for p in runs.column("phase").to_pylist()], dtype=bool)
    mixers, regimes = runs.column("mixer").to_pylist(), runs.column("regime").to_pylist()
    params, error = as_float(runs.column("params")), 1.0 - as_float(runs.column("val_top1"))
    fits = []
    for regime in regime_order([r for r in regimes if r is not None]):
        for mixer in mixer_order([m for m in mixers if m is not None]):
            group = scope & (np.asarray(mixers) == mixer) & (np.asarray(regimes) == regime)
            rows = np.flatnonzero(used & group)
            if rows.size == 0:
                continue
            fit = fit_power_law(params[rows], error[rows], n_boot=n_boot, seed=seed)
            fit.group = {"mixer": mixer, "regime": regime}
            fit.counts = outcome_counts(runs, np.flatnonzero(group))
            fits.append(fit)
            if on_group:
                on_group()
    return fits


def fit_to_dict(fit: PowerLawFit) -> dict:
    return {**fit.group, **{k: v for k, v in asdict(fit).items() if k != "group"}}


def clean_json(obj):
    """NaN/inf -> None so fits.json stays valid JSON."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: clean_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [clean_json(v) for v in obj]
    return obj
