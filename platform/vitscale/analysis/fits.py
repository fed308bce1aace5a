"""Scaling laws: error(P) = a·P^(-b) + c per mixer x regime, and log-log cost exponents vs tokens.

The power law is fitted on individual finished runs (error = 1 - val_top1, P = parameter count)
with P normalised by its geometric mean so the optimiser sees numbers near 1; several starts
(from a log-log line through err - c0) guard against the flat valleys of this model. Bootstrap
CIs resample runs with a fixed seed: within each parameter count when every count has >= 2 runs
(a designed experiment keeps its design), otherwise whole cases, discarding resamples with too
few distinct counts. Groups with fewer than MIN_DISTINCT_P distinct counts are skipped, with a reason.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
from scipy import stats
from scipy.optimize import OptimizeWarning, curve_fit

from vitscale.analysis.fields import as_float, mixer_order, regime_order

MIN_DISTINCT_P = 3
N_BOOT = 1000
B_MAX = 5.0


@dataclass
class PowerLawFit:
    """error(P) = a·P^(-b) + c; `ci` maps a/b/c to [2.5, 97.5] bootstrap percentiles."""

    status: str  # "ok" | "skipped" | "failed"
    n_runs: int
    n_distinct: int
    a: float | None = None
    b: float | None = None
    c: float | None = None
    ci: dict[str, list[float]] = field(default_factory=dict)
    rmse: float | None = None
    n_boot: int = 0
    n_boot_ok: int = 0
    bootstrap: str | None = None
    seed: int | None = None
    reason: str | None = None
    group: dict[str, str] = field(default_factory=dict)

    def predict(self, p: np.ndarray) -> np.ndarray:
        return self.a * np.asarray(p, dtype=float) ** (-self.b) + self.c


def _model(x: np.ndarray, amp: float, b: float, c: float) -> np.ndarray:
    return amp * x ** (-b) + c


def _jac(x: np.ndarray, amp: float, b: float, c: float) -> np.ndarray:
    xb = x ** (-b)
    return np.column_stack([xb, -amp * xb * np.log(x), np.ones_like(x)])


def _fit(x: np.ndarray, err: np.ndarray, starts: list[tuple[float, float, float]]) -> np.ndarray | None:
    """Best (amp, b, c) over the starts by squared error, within amp >= 0, 0 <= b <= B_MAX, 0 <= c <= max err."""
    hi_c = max(float(err.max()), 1e-12)
    lower, upper = [0.0, 0.0, 0.0], [np.inf, B_MAX, hi_c]
    best, best_sse = None, np.inf
    for p0 in starts:
        p0 = np.clip(p0, [1e-12, 1e-6, 0.0], [np.inf, B_MAX - 1e-6, hi_c])
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", OptimizeWarning)
                popt, _ = curve_fit(_model, x, err, p0=p0, bounds=(lower, upper), max_nfev=2000, jac=_jac)
        except (RuntimeError, ValueError):
            continue
        sse = float(((_model(x, *popt) - err) ** 2).sum())
        if sse < best_sse:
            best, best_sse = popt, sse
    return best


def _starts(x: np.ndarray, err: np.ndarray) -> list[tuple[float, float, float]]:
    """Initial guesses: for a few floors c0 below the smallest error, a line through log(err - c0)."""
    out = []
    for frac in (0.0, 0.5, 0.9):
        c0 = frac * float(err.min())
        y = np.log(np.maximum(err - c0, 1e-12))
        slope, intercept = np.polyfit(np.log(x), y, 1) if np.unique(x).size > 1 else (0.0, y.mean())
        out.append((math.exp(intercept), float(np.clip(-slope, 0.01, B_MAX - 0.01)), c0))
    return out


def fit_power_law(
    params: np.ndarray, error: np.ndarray, *, n_boot: int = N_BOOT, seed: int = 0, level: float = 0.95
) -> PowerLawFit:
    """Fit error = a·P^(-b) + c with bootstrap percentile CIs (fixed seed: same input, same numbers)."""
    p, err = np.asarray(params, dtype=float), np.asarray(error, dtype=float)
    ok = np.isfinite(p) & np.isfinite(err) & (p > 0)
    p, err = p[ok], err[ok]
    levels = np.unique(p)
    fit = PowerLawFit(status="skipped", n_runs=int(p.size), n_distinct=int(levels.size))
    if levels.size < MIN_DISTINCT_P:
        fit.reason = f"{levels.size} distinct parameter count(s), a 3-parameter law needs >= {MIN_DISTINCT_P}"
        return fit
    p0 = float(np.exp(np.log(levels).mean()))
    x = p / p0
    best = _fit(x, err, _starts(x, err))
    if best is None:
        fit.status, fit.reason = "failed", "curve_fit did not converge from any start"
        return fit
    amp, b, c = (float(v) for v in best)
    fit.status, fit.a, fit.b, fit.c = "ok", amp * p0**b, b, c
    fit.rmse = float(np.sqrt(((_model(x, *best) - err) ** 2).mean()))
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
                continue
        got = _fit(x[idx], err[idx], [tuple(best)])
        if got is not None:
            draws.append((got[0] * p0 ** got[1], got[1], got[2]))
    fit.n_boot, fit.n_boot_ok, fit.seed = n_boot, len(draws), seed
    fit.bootstrap = "stratified" if stratified else "cases"
    if len(draws) >= 10:
        arr = np.asarray(draws)
        q = [100 * (1 - level) / 2, 100 * (1 + level) / 2]
        fit.ci = {k: [float(v) for v in np.percentile(arr[:, j], q)] for j, k in enumerate("abc")}
    return fit


def loglog_slope(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> dict:
    """OLS slope of log y on log x with its t-based CI (None with fewer than 3 points)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[ok]), np.log(y[ok])
    out: dict = {"n": int(ok.sum()), "slope": None, "intercept": None, "ci": None, "r2": None}
    if np.unique(lx).size < 2:
        return out
    res = stats.linregress(lx, ly)
    out.update(slope=float(res.slope), intercept=float(res.intercept), r2=float(res.rvalue**2))
    if out["n"] >= 3:
        half = float(stats.t.ppf(0.5 + level / 2, out["n"] - 2) * res.stderr)
        out["ci"] = [out["slope"] - half, out["slope"] + half]
    return out


def scaling_fits(runs: pa.Table, *, n_boot: int = N_BOOT, seed: int = 0, on_group=None) -> list[PowerLawFit]:
    """One power-law fit per mixer x regime over finished runs of a `with_fields` table."""
    if "val_top1" not in runs.column_names or "params" not in runs.column_names:
        return []
    used = np.asarray(runs.column("used").to_pylist(), dtype=bool)
    mixers, regimes = runs.column("mixer").to_pylist(), runs.column("regime").to_pylist()
    params, error = as_float(runs.column("params")), 1.0 - as_float(runs.column("val_top1"))
    fits = []
    for regime in regime_order([r for r in regimes if r is not None]):
        for mixer in mixer_order([m for m in mixers if m is not None]):
            rows = np.flatnonzero(used & (np.asarray(mixers) == mixer) & (np.asarray(regimes) == regime))
            if rows.size == 0:
                continue
            fit = fit_power_law(params[rows], error[rows], n_boot=n_boot, seed=seed)
            fit.group = {"mixer": mixer, "regime": regime}
            fits.append(fit)
            if on_group:
                on_group()
    return fits


def cost_exponents(agg: pa.Table) -> list[dict]:
    """Log-log slopes of FLOPs and of time per image against tokens, per series x regime x setting."""
    tokens_col = "tokens_mean" if "tokens_mean" in agg.column_names else "tokens"
    if tokens_col not in agg.column_names or "n_used" not in agg.column_names:
        return []
    ips = next(
        (c for c in ("images_per_second_mean", "train_images_per_second_mean") if c in agg.column_names), None
    )
    quantities = {
        "flops_per_image": as_float(agg.column("flops_per_image_mean"))
        if "flops_per_image_mean" in agg.column_names
        else None,
        "seconds_per_image": 1.0 / as_float(agg.column(ips)) if ips else None,
    }
    tokens, n_used = as_float(agg.column(tokens_col)), as_float(agg.column("n_used"))
    keys = ["series", "regime", "setting"]
    rows = list(zip(*(agg.column(k).to_pylist() for k in keys), strict=True))
    out = []
    for key in dict.fromkeys(rows):
        idx = np.array([i for i, r in enumerate(rows) if r == key and n_used[i] > 0], dtype=int)
        if np.unique(tokens[idx][np.isfinite(tokens[idx])]).size < 2:
            continue
        for name, vals in quantities.items():
            if vals is None:
                continue
            fit = loglog_slope(tokens[idx], vals[idx])
            if fit["slope"] is None:
                continue
            group = {k: (v if isinstance(v, str) else str(v)) for k, v in zip(keys, key, strict=True)}
            out.append({**group, "quantity": name, "x": "tokens", **fit})
    return out


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
