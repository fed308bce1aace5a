"""isoFLOP curves (Hoffmann et al. 2022, approach 2): at fixed training compute C, test error
against model size N, and the compute-optimal size N*(C) ∝ C^a.

- Budgets: N_BUDGETS log-spaced between the smallest and the largest C at which at least
  min(3, sizes) sizes have runs on both sides (outside that no curve has a minimum to find).
- A size's error at budget C: its (N, D) cells' mean error over seeds, interpolated linearly in
  log C – log error between its own data levels. Never extrapolated: a size whose cells do not
  bracket C (or that has one data level) is absent at that C.
- The minimum at a budget: the sizes present, their interpolated errors; through the measured
  minimum and up to two sizes either side a parabola in log N (of log error), as Chinchilla
  does, when >= 3 sizes are present; its vertex is N* when it opens upward and lies inside those
  sizes, else the best measured size is. A minimum at the smallest or largest size present is
  flagged `edge` (the optimum may lie beyond the sizes measured there) and not used as an
  interior optimum.
- a: least squares of log N* on log C over the interior minima, fitted when >= MIN_INTERIOR
  budgets have one; its 95 % interval from the group's bootstrap (ComputePoints.resample, the
  same budgets each time; a resample with fewer interior minima counts as failed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from vitscale.analysis.statistics.compute_points import ComputePoints
from vitscale.analysis.statistics.fits import MIN_BOOT_OK

N_BUDGETS = 8
MIN_INTERIOR = 4
WINDOW = 2  # sizes either side of the measured minimum the parabola goes through


@dataclass
class IsoFlopMinimum:
    budget: float
    sizes: list[float]  # present at this budget, ascending
    errors: list[float]  # their interpolated test errors
    n_opt: float | None = None
    err_opt: float | None = None
    method: str = "measured"  # "parabola" | "measured"
    edge: bool = True
    parabola: list[float] = field(default_factory=list)  # c2, c1, c0 of log err in log N; its log N span


@dataclass
class IsoFlops:
    """Budgets, the minimum at each, and N*(C) ∝ C^a where enough minima are interior."""

    status: str  # "ok" | "not_fitted" | "none"
    budgets: list[float] = field(default_factory=list)
    minima: list[IsoFlopMinimum] = field(default_factory=list)
    n_interior: int = 0
    a: float | None = None  # N* ∝ C^a
    intercept: float | None = None  # log N* at C = 1
    ci: list[float] = field(default_factory=list)
    n_boot: int = 0
    n_boot_ok: int = 0
    reason: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)


def size_curves(cells: dict[str, np.ndarray]) -> dict[float, tuple[np.ndarray, np.ndarray]]:
    """Size -> (log C, log error) of its cells sorted by C, for sizes with >= 2 data levels."""
    out = {}
    for v in np.unique(cells["n"]):
        at = cells["n"] == v
        if at.sum() >= 2:
            order = np.argsort(cells["c"][at])
            out[float(v)] = (np.log(cells["c"][at][order]), np.log(cells["err"][at][order]))
    return out


def budgets_for(curves: dict[float, tuple[np.ndarray, np.ndarray]], k: int = N_BUDGETS) -> list[float]:
    """k log-spaced budgets over the C range where >= min(3, sizes) sizes bracket C."""
    if len(curves) < 2:
        return []
    spans = np.array([(lc[0], lc[-1]) for lc, _ in curves.values()])
    need = min(3, len(curves))
    fine = np.linspace(spans[:, 0].min(), spans[:, 1].max(), 2001)
    count = ((spans[:, :1] <= fine) & (fine <= spans[:, 1:])).sum(axis=0)
    ok = np.flatnonzero(count >= need)
    if ok.size == 0 or fine[ok[-1]] <= fine[ok[0]]:
        return []
    return [float(v) for v in np.exp(np.linspace(fine[ok[0]], fine[ok[-1]], k))]


def minimum_at(budget: float, curves: dict[float, tuple[np.ndarray, np.ndarray]]) -> IsoFlopMinimum:
    """The sizes present at `budget`, their errors and the minimum over them (module docstring)."""
    lb, sizes, errs = np.log(budget), [], []
    for v, (lc, le) in sorted(curves.items()):
        if lc[0] <= lb <= lc[-1]:
            sizes.append(v)
            errs.append(float(np.exp(np.interp(lb, lc, le))))
    m = IsoFlopMinimum(budget=budget, sizes=sizes, errors=errs)
    if not sizes:
        return m
    j = int(np.argmin(errs))
    m.n_opt, m.err_opt, m.edge = sizes[j], errs[j], j in (0, len(sizes) - 1)
    if m.edge or len(sizes) < 3:
        return m
    lo, hi = max(0, j - WINDOW), min(len(sizes), j + WINDOW + 1)
    ln, le = np.log(sizes[lo:hi]), np.log(errs[lo:hi])
    c2, c1, c0 = np.polyfit(ln, le, 2)
    if c2 > 0 and ln[0] <= -c1 / (2 * c2) <= ln[-1]:
        vertex = -c1 / (2 * c2)
        m.parabola = [float(c2), float(c1), float(c0), float(ln[0]), float(ln[-1])]
        m.n_opt, m.err_opt, m.method = (
            float(np.exp(vertex)),
            float(np.exp(np.polyval([c2, c1, c0], vertex))),
            "parabola",
        )
    return m


def _slope(minima: list[IsoFlopMinimum]) -> tuple[float, float] | None:
    """(a, intercept) of log N* = intercept + a·log C over the interior minima, or None (< MIN_INTERIOR)."""
    inner = [m for m in minima if m.n_opt is not None and not m.edge]
    if len(inner) < MIN_INTERIOR:
        return None
    a, b = np.polyfit(np.log([m.budget for m in inner]), np.log([m.n_opt for m in inner]), 1)
    return float(a), float(b)


def isoflops(pts: ComputePoints, *, n_boot: int, seed: int = 0, level: float = 0.95) -> IsoFlops:
    """isoFLOP minima of the group and the N*(C) exponent with its bootstrap interval."""
    curves = size_curves(pts.cell_means())
    out = IsoFlops(status="none", budgets=budgets_for(curves))
    if not out.budgets:
        multi = len(curves)
        out.reason = (
            f"no isoFLOP curve: {multi} size(s) with >= 2 data levels (needs >= 2 sizes whose runs span "
            "a common compute range)"
        )
        return out
    out.minima = [minimum_at(b, curves) for b in out.budgets]
    out.n_interior = sum(m.n_opt is not None and not m.edge for m in out.minima)
    got = _slope(out.minima)
    if got is None:
        out.status = "not_fitted"
        out.reason = (
            f"N*(C) not fitted: {out.n_interior} budgets with an interior minimum (needs >= {MIN_INTERIOR})"
        )
        return out
    out.status, (out.a, out.intercept) = "ok", got
    rng, slopes = np.random.default_rng(seed), []
    for _ in range(n_boot):
        idx, e = pts.resample(rng)
        fit = _slope([minimum_at(b, size_curves(pts.cell_means(idx, e))) for b in out.budgets])
        if fit is not None:
            slopes.append(fit[0])
    out.n_boot, out.n_boot_ok = n_boot, len(slopes)
    if len(slopes) >= MIN_BOOT_OK:
        out.ci = [float(v) for v in np.percentile(slopes, [100 * (1 - level) / 2, 100 * (1 + level) / 2])]
    return out
