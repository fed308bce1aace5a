"""The trend of test error along one axis (analysis.axes), fitted only where enough levels carry it.

Fewer than MIN_TREND_LEVELS levels with results get no trend and say so: a curve through 3-5
points bends any way a 2-3 parameter form lets it. Two forms, chosen by the axis:
- `power_law`: error = a·x^(-b) + c through every run's error, by analysis.fits.fit_power_law
  (log space, Huber, grid of starts; b's 95 % interval by its bootstrap of seeds within levels).
  For axes where more is expected to help: Gaussians, training resolution.
- `log_linear_*`: error = α + β·log_base(x) by least squares over every run's error; β (error per
  doubling, or per decade) with a 95 % percentile interval from a bootstrap that redraws whole
  seeds (a seed's runs at every level together, fixed generator seed). For axes with no reason to
  be monotone in a power law: solver tolerance (looser may cost accuracy), evaluation side (best
  near the trained side).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from vitscale.analysis.statistics.fits import MIN_BOOT_OK, N_BOOT, PowerLawFit, fit_power_law

MIN_TREND_LEVELS = 6
LOG_UNITS = {2: "doubling", 10: "decade"}


@dataclass
class AxisTrend:
    """A fitted trend (status "ok"), or why there is none ("not_fitted", "failed") in `reason`."""

    kind: str  # a key of TRENDS
    status: str
    n_levels: int
    quantity: str = ""  # the fitted form
    estimate: float | None = None  # power law: the exponent b; log-linear: the slope β (error fraction)
    ci: list[float] | None = None  # 95 % bootstrap percentiles of `estimate`
    reason: str | None = None
    intercept: float | None = None  # log-linear: α, the error at x = 1
    base: int | None = None  # log-linear: of the logarithm
    fit: PowerLawFit | None = None  # power law: the whole fit (a, c, their intervals, dof, LOSO)
    n_boot: int = 0
    n_boot_ok: int = 0
    seed: int | None = None

    def predict(self, x: np.ndarray) -> np.ndarray:
        """The fitted error at x (fractions); only for status "ok"."""
        if self.fit is not None:
            return self.fit.predict(x)
        return self.intercept + self.estimate * np.log(np.asarray(x, dtype=float)) / np.log(self.base)


def _power_law(x, error, seeds, *, n_boot: int, seed: int) -> AxisTrend:
    fit = fit_power_law(x, error, n_boot=n_boot, seed=seed)
    trend = AxisTrend("power_law", fit.status, fit.n_distinct, "error = a·x^-b + c", fit=fit)
    trend.n_boot, trend.n_boot_ok, trend.seed = fit.n_boot, fit.n_boot_ok, fit.seed
    if fit.status != "ok":
        trend.reason = fit.reason
        trend.fit = None
        return trend
    trend.estimate, trend.ci = fit.b, fit.ci.get("b")
    notes = [f"at a bound: {', '.join(fit.at_bound)}"] if fit.at_bound else []
    notes += [fit.reason] if fit.reason else []
    trend.reason = "; ".join(notes) or None
    return trend


def _slope(lx: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """(α, β) of y = α + β·lx by least squares."""
    beta, alpha = np.polyfit(lx, y, 1)
    return float(alpha), float(beta)


def _log_linear(x, error, seeds, *, n_boot: int, seed: int, base: int) -> AxisTrend:
    lx = np.log(np.asarray(x, dtype=float)) / np.log(base)
    y = np.asarray(error, dtype=float)
    unit = LOG_UNITS[base]
    trend = AxisTrend(
        f"log_linear_{unit}", "ok", int(np.unique(lx).size), f"error = α + β·log{base}(x), β per {unit}"
    )
    trend.base = base
    trend.intercept, trend.estimate = _slope(lx, y)
    labels = np.asarray([str(s) for s in seeds])
    clusters = [np.flatnonzero(labels == s) for s in dict.fromkeys(labels)]
    trend.n_boot, trend.seed = n_boot, seed
    if len(clusters) < 2:
        trend.reason = "no interval: one seed (the bootstrap redraws seeds)"
        return trend
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        idx = np.concatenate([clusters[j] for j in rng.integers(0, len(clusters), len(clusters))])
        if np.unique(lx[idx]).size >= 2:
            draws.append(_slope(lx[idx], y[idx])[1])
    trend.n_boot_ok = len(draws)
    if len(draws) >= MIN_BOOT_OK:
        trend.ci = [float(v) for v in np.percentile(draws, [2.5, 97.5])]
    elif n_boot:
        trend.reason = f"no interval: {len(draws)} of {n_boot} bootstrap resamples kept 2 levels"
    return trend


TRENDS = {
    "power_law": _power_law,
    "log_linear_doubling": functools.partial(_log_linear, base=2),
    "log_linear_decade": functools.partial(_log_linear, base=10),
}


def fit_trend(
    kind: str,
    x: np.ndarray,
    error: np.ndarray,
    seeds: list,
    *,
    n_levels: int,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> AxisTrend:
    """The `kind` trend through per-run (x, error) points (`seeds`: each point's seed), or, with
    fewer than MIN_TREND_LEVELS levels with results, none and the reason."""
    if n_levels < MIN_TREND_LEVELS:
        return AxisTrend(
            kind,
            "not_fitted",
            n_levels,
            reason=f"{n_levels} levels: no trend fitted (needs {MIN_TREND_LEVELS})",
        )
    return TRENDS[kind](x, error, seeds, n_boot=n_boot, seed=seed)
