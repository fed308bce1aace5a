"""Scaling laws: error(P) = a·P^(-b) + c per mixer x regime, fitted only where the data carry it.

A 3-parameter law through 3 sizes is exactly determined (it passes through every size mean), so
a fit needs >= MIN_DISTINCT_P = 4 distinct parameter counts; with fewer the report says
"not fitted: N sizes" and gives no interval. The fit follows Besiroglu et al. (2024), "Chinchilla
scaling: a replication attempt": in log space, log err ≈ LSE(α − b·log x, γ) with a = e^α, c = e^γ,
a Huber loss (δ = 1e-3) on the log residuals, L-BFGS-B from a grid of initialisations, the best
kept. P is normalised by its geometric mean (x) so the optimiser sees numbers near 1. Parameters
that end on a bound are flagged.

Every fit says how far it can be trusted, because a 3-parameter law bends through 4-6 sizes easily:
- `dof`: residual degrees of freedom, distinct sizes − 3 (a fit needs dof >= 1).
- leave-one-size-out: refit without each size (from the whole grid of starts) and predict that
  size's mean error; `loso_rms` / `loso_max` in points of error. Holding out the largest size is
  the extrapolation a scaling law is read for.
- bootstrap (fixed seed): the runs (seeds) are resampled within each size when every size has >= 2
  ("seeds"), else whole runs across sizes ("cases"). Where per-image predictions cover every run
  of the fit on the fit's split, each resample also redraws those images with replacement, one
  draw for all runs (they share the split: paired), and moves each run's error by its error on the
  drawn images minus its error on all of them ("seeds+images" / "cases+images"); the stored metric
  stays the centre. Without them the record says "seeds" and `bootstrap_note` why. Resamples whose
  fit fails, or that keep fewer than 4 sizes, are counted as failed, never silently dropped.
- `floor_extrapolated`: the floor c is a measured plateau only if the data reach it. True when c's
  interval reaches 0 (its lower end below ZERO_FRACTION of the smallest size-mean error: the data
  cannot tell a floor from none), or when the smallest size-mean error lies above c by more than
  FLOOR_MARGIN x the interval's half-width (every size is clearly above the floor: c is where the
  law is extrapolated to, not where runs were); None when there is no interval (unless c sits at
  its lower bound: True).
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
from scipy.optimize import minimize
from scipy.special import expit

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.load.outcomes import outcome_counts
from vitscale.analysis.load.predictions import correctness
from vitscale.models.registry import mixer_order, regime_order

MIN_DISTINCT_P = 4
N_BOOT = 1000
B_MAX = 5.0
C_MIN = 1e-6  # c's lower bound (c = 0 is not reachable in log space): c at C_MIN means "no floor"
HUBER_DELTA = 1e-3
MIN_BOOT_OK = 10  # fewer successful resamples than this: no interval
# The Huber loss of a good fit is ~1e-5 and L-BFGS-B's ftol is absolute below 1: with the defaults a
# resample warm-started at the full-data optimum stopped there at once, and c's interval came out
# thousands of times too narrow (e.g. [1.5012, 1.5018] % where refits from the grid spread 0-4.4 %).
LBFGS_OPTIONS = {"ftol": 1e-12, "gtol": 1e-9}
FLOOR_MARGIN = 2.0  # min size-mean error - c beyond this many half-widths of c's interval: extrapolated
ZERO_FRACTION = 0.01  # c's interval reaches 0 when its lower end is below this share of the smallest error
FIT_SPLIT = "val"  # the split the fitted error (1 - val_top1) is measured on, and its images resampled


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
    dof: int = 0  # distinct sizes - 3 fitted parameters
    loso: list[dict] = field(default_factory=list)  # per held-out size: params, observed, predicted
    loso_rms: float | None = None  # points of error
    loso_max: float | None = None  # points of error, the worst held-out size
    floor_gap: float | None = None  # smallest size-mean error - c
    floor_extrapolated: bool | None = None
    loss: str = f"huber(delta={HUBER_DELTA}) on log error"
    n_starts: int = 0
    n_boot: int = 0
    n_boot_ok: int = 0
    bootstrap: str | None = None  # "seeds" | "seeds+images" | "cases" | "cases+images"
    bootstrap_note: str | None = None  # why images were not resampled
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


def best_of_starts(objective, starts: list[np.ndarray], bounds: list, args: tuple) -> np.ndarray | None:
    """L-BFGS-B from each start (clipped into the bounds); the converged θ of least loss, or None.
    `objective(θ, *args)` returns (loss, gradient). Shared by every Huber-in-log-space fit."""
    lo, hi = np.array([b[0] for b in bounds]), np.array([b[1] for b in bounds])
    best, best_loss = None, np.inf
    for p0 in starts:
        res = minimize(
            objective,
            np.clip(p0, lo, hi),
            args=args,
            jac=True,
            method="L-BFGS-B",
            bounds=bounds,
            options=LBFGS_OPTIONS,
        )
        if res.success and np.all(np.isfinite(res.x)) and res.fun < best_loss:
            best, best_loss = res.x, float(res.fun)
    return best


def _fit(x: np.ndarray, err: np.ndarray, starts: list[np.ndarray]) -> np.ndarray | None:
    """Best converged (α, b, γ) over the starts by the Huber loss; None if no start converged."""
    return best_of_starts(_objective, starts, _bounds(err), (np.log(x), np.log(err)))


def _starts(err: np.ndarray) -> list[np.ndarray]:
    """A grid of initialisations: exponents 0.1–2, floors 0 / half / nine tenths of the smallest error."""
    out = []
    for c0 in (C_MIN, 0.5 * float(err.min()), 0.9 * float(err.min())):
        amp = max(float(np.exp(np.log(err).mean())) - c0, C_MIN)  # at x = 1 (the geometric mean of P)
        for b0 in (0.1, 0.3, 0.6, 1.0, 2.0):
            out.append(np.array([math.log(amp), b0, math.log(max(c0, C_MIN))]))
    return out


def _at_bound(theta: np.ndarray, err: np.ndarray, tol: float = 1e-4) -> list[str]:
    """Parameters within `tol` of a bound (γ in log space: c within 0.01 % of it)."""
    _, (b_lo, b_hi), (g_lo, g_hi) = _bounds(err)
    flags = []
    b, gamma = float(theta[1]), float(theta[2])
    if b <= b_lo + tol:
        flags.append("b=0 (lower bound)")
    if b >= b_hi - tol:
        flags.append(f"b={B_MAX:g} (upper bound)")
    if gamma <= g_lo + tol:
        flags.append("c=0 (lower bound)")
    if gamma >= g_hi - tol:
        flags.append("c=largest error (upper bound)")
    return flags


def _theta_to_abc(theta: np.ndarray, p0: float) -> tuple[float, float, float]:
    return math.exp(theta[0]) * p0 ** theta[1], float(theta[1]), math.exp(theta[2])


def leave_one_size_out(p: np.ndarray, err: np.ndarray, p0: float) -> list[dict]:
    """Per size: refit on the other sizes, predict this size's mean error (None if no start converged)."""
    out, x = [], p / p0
    for v in np.unique(p):
        keep = p != v
        theta = _fit(x[keep], err[keep], _starts(err[keep]))
        predicted = None
        if theta is not None:
            predicted = float(math.exp(theta[0]) * (v / p0) ** -theta[1] + math.exp(theta[2]))
        out.append({"params": float(v), "observed": float(err[p == v].mean()), "predicted": predicted})
    return out


def _floor_extrapolated(fit: PowerLawFit) -> bool | None:
    """See the module docstring: c's interval reaches its bound, or every size is far above c."""
    if "c=0 (lower bound)" in fit.at_bound:
        return True
    if "c" not in fit.ci:
        return None
    lo, hi = fit.ci["c"]
    smallest = fit.floor_gap + fit.c
    return bool(lo < ZERO_FRACTION * smallest or fit.floor_gap > FLOOR_MARGIN * (hi - lo) / 2)


def fit_power_law(
    params: np.ndarray,
    error: np.ndarray,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = 0.95,
    wrong: np.ndarray | None = None,
    bootstrap_note: str | None = None,
) -> PowerLawFit:
    """Fit error = a·P^(-b) + c with dof, leave-one-size-out error and bootstrap percentile CIs
    (fixed seed: same input, same numbers). `wrong` (runs x images, 1 = misclassified, rows as
    `params`) adds the images to the bootstrap; `bootstrap_note` says why it is absent."""
    p, err = np.asarray(params, dtype=float), np.asarray(error, dtype=float)
    ok = np.isfinite(p) & np.isfinite(err) & (p > 0) & (err > 0)
    p, err = p[ok], err[ok]
    wrong = None if wrong is None else np.asarray(wrong, dtype=float)[ok]
    levels = np.unique(p)
    fit = PowerLawFit(status="not_fitted", n_runs=int(p.size), n_distinct=int(levels.size))
    fit.dof = int(levels.size) - 3
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
    fit.status = "ok"
    fit.a, fit.b, fit.c = _theta_to_abc(best, p0)
    fit.at_bound = _at_bound(best, err)
    fit.rmse = float(np.sqrt(((fit.predict(p) - err) ** 2).mean()))
    fit.loso = leave_one_size_out(p, err, p0)
    misses = [100 * abs(r["predicted"] - r["observed"]) for r in fit.loso if r["predicted"] is not None]
    if misses:
        fit.loso_rms, fit.loso_max = float(np.sqrt(np.mean(np.square(misses)))), float(max(misses))
    by_level = [np.flatnonzero(p == v) for v in levels]
    fit.floor_gap = float(min(err[ix].mean() for ix in by_level) - fit.c)
    draws = _bootstrap(x, err, by_level, best, starts, n_boot, seed, wrong)
    stratified = all(ix.size >= 2 for ix in by_level)
    fit.n_boot, fit.n_boot_ok, fit.seed = n_boot, len(draws), seed
    fit.bootstrap = ("seeds" if stratified else "cases") + ("+images" if wrong is not None else "")
    fit.bootstrap_note = None if wrong is not None else bootstrap_note
    if len(draws) >= MIN_BOOT_OK:
        arr = np.asarray([_theta_to_abc(t, p0) for t in draws])
        q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
        fit.ci = {k: [float(v) for v in np.percentile(arr[:, j], q)] for j, k in enumerate("abc")}
    elif n_boot:
        fit.reason = f"no interval: {len(draws)} of {n_boot} bootstrap resamples succeeded"
    fit.floor_extrapolated = _floor_extrapolated(fit)
    return fit


def _bootstrap(
    x: np.ndarray,
    err: np.ndarray,
    by_level: list[np.ndarray],
    best: np.ndarray,
    starts: list[np.ndarray],
    n_boot: int,
    seed: int,
    wrong: np.ndarray | None,
) -> list[np.ndarray]:
    """The (α, b, γ) of each successful resample: runs within sizes (else cases), then images."""
    rng = np.random.default_rng(seed)
    stratified = all(ix.size >= 2 for ix in by_level)
    on_all = wrong.mean(axis=1) if wrong is not None else None
    floor = 0.5 / wrong.shape[1] if wrong is not None else C_MIN  # half an image: keeps the log finite
    draws = []
    for _ in range(n_boot):
        if stratified:
            idx = np.concatenate([rng.choice(ix, size=ix.size, replace=True) for ix in by_level])
        else:
            idx = rng.integers(0, x.size, x.size)
            if np.unique(x[idx]).size < MIN_DISTINCT_P:
                continue  # counted as failed: n_boot - n_boot_ok
        e = err[idx]
        if wrong is not None:
            weights = np.bincount(rng.integers(0, wrong.shape[1], wrong.shape[1]), minlength=wrong.shape[1])
            e = np.maximum(e + (wrong[idx] @ weights) / wrong.shape[1] - on_all[idx], floor)
        got = _fit(x[idx], e, [best])  # warm start at the full-data optimum
        got = got if got is not None else _fit(x[idx], e, starts)  # else the whole grid
        if got is not None:
            draws.append(got)
    return draws


def image_matrix(
    predictions: pa.Table | None, run_ids: list[str], split: str = FIT_SPLIT
) -> tuple[np.ndarray | None, str | None]:
    """(runs x images misclassified matrix over the images every run was scored on, None) or
    (None, why not): the images a fit's bootstrap may resample."""
    if predictions is None:
        return None, "images not resampled: no per-image predictions given to the fit"
    lacking = sorted({"run_id", "split", "index", "correct"} - set(predictions.column_names))
    if lacking:
        return None, f"images not resampled: predictions lack {', '.join(lacking)}"
    by_run = correctness(predictions, split)  # run_id -> (sorted image index, correct)
    missing = sum(r not in by_run for r in run_ids)
    if missing:
        return (
            None,
            f"images not resampled: {missing} of {len(run_ids)} runs have no per-image predictions on {split}",
        )
    common = functools.reduce(np.intersect1d, (by_run[r][0] for r in run_ids))
    if common.size == 0:
        return None, f"images not resampled: the runs share no {split} image"
    rows = [1.0 - by_run[r][1][np.searchsorted(by_run[r][0], common)].astype(float) for r in run_ids]
    return np.vstack(rows), None


def scaling_fits(
    runs: pa.Table,
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
    on_group=None,
    final_only: bool = False,
    predictions: pa.Table | None = None,
) -> list[PowerLawFit]:
    """One power-law fit per mixer x regime over the finished runs of a `with_outcomes` table
    (comparison studies: `final_only`, the tuned configurations, not the tuning trials).
    `predictions` (run_id, split, index, correct: predictions.parquet) adds the FIT_SPLIT images
    to the bootstrap of every group whose runs all have them."""
    if "val_top1" not in runs.column_names or "params" not in runs.column_names:
        return []
    used = np.asarray(runs.column("used").to_pylist(), dtype=bool)
    scope = np.ones(runs.num_rows, dtype=bool)
    if final_only:
        scope = np.asarray([p == "final" for p in runs.column("phase").to_pylist()], dtype=bool)
    mixers, regimes = runs.column("mixer").to_pylist(), runs.column("regime").to_pylist()
    params, error = as_float(runs.column("params")), 1.0 - as_float(runs.column("val_top1"))
    run_ids = runs.column("run_id").to_pylist()
    fits = []
    for regime in regime_order([r for r in regimes if r is not None]):
        for mixer in mixer_order([m for m in mixers if m is not None]):
            group = scope & (np.asarray(mixers) == mixer) & (np.asarray(regimes) == regime)
            rows = np.flatnonzero(used & group)
            if rows.size == 0:
                continue
            wrong, note = image_matrix(predictions, [run_ids[i] for i in rows]) if n_boot else (None, None)
            fit = fit_power_law(
                params[rows], error[rows], n_boot=n_boot, seed=seed, wrong=wrong, bootstrap_note=note
            )
            fit.group = {"mixer": mixer, "regime": regime}
            fit.counts = outcome_counts(runs, np.flatnonzero(group))
            fits.append(fit)
            if on_group:
                on_group()
    return fits


def fit_rules() -> dict[str, str]:
    """How dof, leave-one-size-out, the bootstrap and the floor flag are defined (fits.json settings)."""
    return {
        "dof": f"distinct sizes - 3; fits need >= {MIN_DISTINCT_P} sizes (dof >= 1)",
        "loso": "refit without each size, predict its mean error; loso_rms / loso_max in points",
        "bootstrap": (
            "seeds: runs resampled within each size; cases: whole runs (a size has one run); "
            f"+images: the {FIT_SPLIT} images redrawn too, one draw for all runs, each run's error "
            "moved by its error on the drawn images minus on all"
        ),
        "floor_extrapolated": (
            f"c's interval reaches 0 (lower end < {ZERO_FRACTION:g} x the smallest size-mean error), or "
            f"min size-mean error - c > {FLOOR_MARGIN:g} x the interval's half-width; null without one"
        ),
    }


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
