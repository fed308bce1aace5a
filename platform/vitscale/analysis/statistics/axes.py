"""The study's other axes as scaling curves: test error against a setting a mixer or regime
declares as an axis (e.g. a mixer's number of Gaussians, a solver's tolerance, with the NFE it
cost), the training resolution and the evaluation side.

The axes (`axes_table()`), and how each reads its levels from the runs table. Each axis names the
params it owns (left out of the setting key), the runs it applies to, how a group's runs become
(run, x, error) points, its trend model and its cost metric.
- declared axes (`models.facts.SearchAxis`, in registration order: the mixers', then the
  regimes'): `model.<owner>.<field>` on the owner's rows that logged it, except where a field
  holds a value the axis means nothing at (`unless`: a fixed-grid solver ignores tolerances).
  The x is the first field that tells the group's levels apart (the others ride along, shown per
  level), else the first; a full grid over two fields becomes one curve per value of the second.
  Cost `nfe`: test's NFE, else val's, else the last training epoch's.
- resolution: `data.resolution` (`model.image_size` follows it); power law.
- eval_resolution: the sides a group's runs were evaluated at (`test_top1_at<R>`) plus the side
  they were trained at (`test_top1`); one curve per training setting; log-linear per doubling.

The curves (axis_study). A curve compares only runs that differ in its axis alone: runs are grouped
by every param except the seeds and the axis's own params, so a width or learning rate that also
varies makes separate curves, never a pooled one. A mixer's or regime's settings section
(`model.<mixer>.*`, `model.<regime>.*`) does nothing on another mixer's or regime's rows, so it
does not split those (a study crossing a baseline with the candidate's `model.<candidate>.<field>`
has one baseline curve, not one per value). Per level: the test error (1 − test_top1, failed runs dropped or scored as chance by
the policy) as mean ± 95 % t-interval over seeds, n, and the outcomes of the level's runs. An axis
that no group varies (< 2 levels) yields no study at all: no figure, no section.

The trend (fit_trend), fitted only through >= MIN_TREND_LEVELS levels with results; with fewer the
curve says why: a curve through 3-5 points bends any way a 2-3 parameter form lets it. Two forms,
chosen by the axis:
- `power_law`: error = a·x^(-b) + c through every run's error, by statistics.fits.fit_power_law
  (log space, Huber, grid of starts; b's 95 % interval by its bootstrap of seeds within levels).
  For axes where more is expected to help (Gaussians, training resolution).
- `log_linear_*`: error = α + β·log_base(x) by least squares over every run's error; β (error per
  doubling, or per decade) with a 95 % percentile interval from a bootstrap that redraws whole
  seeds (a seed's runs at every level together, fixed generator seed). For axes with no reason to
  be monotone in a power law (a solver's tolerance: looser may cost accuracy; the evaluation side:
  best near the trained side).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import SEED_COLUMNS, as_float
from vitscale.analysis.load.outcomes import outcome_counts, scored
from vitscale.analysis.statistics.aggregate import mean_ci
from vitscale.analysis.statistics.fits import MIN_BOOT_OK, N_BOOT, PowerLawFit, fit_power_law
from vitscale.analysis.statistics.resolution import eval_resolutions
from vitscale.models.facts import SearchAxis
from vitscale.models.registry import MIXERS, REGIMES, mixer_order, regime_order, sections
from vitscale.train.metrics import at_resolution

METRIC = "test_top1"  # the error is 1 − this: reported, nothing selects on it
# The cost beside the tolerance, the first one logged: test's NFE (the split the error is on), else
# validation's, else the last training epoch's forwards.
NFE_METRICS = ("test_nfe_mean", "val_nfe_mean", "nfe_mean")
# A declared axis's `cost` -> the metrics it is read from, the first one logged.
AXIS_COSTS = {"nfe": NFE_METRICS}


@dataclass(frozen=True)
class Axis:
    """How one axis reads its levels: the params it owns (left out of the setting key), the runs it
    applies to, how points are drawn from a group's runs, its trend model and its cost."""

    name: str
    title: str
    xlabel: str
    params: tuple[str, ...]
    applies: Callable[[pa.Table], np.ndarray]
    points: Callable[[Axis, pa.Table, list[int], str], list[AxisPoints]]
    trend: str  # a key of TRENDS
    cost_metrics: tuple[str, ...] = ()
    x_names: dict[str, str] = field(default_factory=dict)  # x param -> its axis label, where not `xlabel`

    def x_label(self, x_params: list[str]) -> str:
        """The x label of curves reading these params (tolerance: rtol, or atol where only it varies)."""
        return " / ".join(dict.fromkeys(self.x_names.get(p, self.xlabel) for p in x_params)) or self.xlabel


@dataclass
class AxisPoints:
    """Per-run points of one curve: run row, x, error; the x param and the fixed values it split on."""

    rows: np.ndarray
    x: np.ndarray
    error: np.ndarray
    x_param: str
    split: dict[str, Any] = field(default_factory=dict)
    riding: dict[str, np.ndarray] = field(default_factory=dict)


def column_values(table: pa.Table, name: str) -> list:
    return table.column(name).to_pylist() if name in table.column_names else [None] * table.num_rows


def _param_points(axis: Axis, table: pa.Table, rows: list[int], policy: str) -> list[AxisPoints]:
    """x from the first axis param that tells the group's level tuples apart; else split by the others."""
    present = [p for p in axis.params if p in table.column_names]
    if not present:
        return []
    error = 1.0 - scored(table, METRIC, policy)
    idx = np.asarray(rows)
    values = {p: column_values(table, p) for p in present}
    tuples = {tuple(values[p][i] for p in present) for i in rows}
    for p in present:
        if len({t[present.index(p)] for t in tuples}) == len(tuples):
            riding = {q: as_float(table.column(q))[idx] for q in present if q != p}
            return [AxisPoints(idx, as_float(table.column(p))[idx], error[idx], p, riding=riding)]
    x_param, rest = present[0], present[1:]  # a grid: hold the others fixed, one curve each
    out = []
    for key in dict.fromkeys(tuple(values[q][i] for q in rest) for i in rows):
        sub = idx[[tuple(values[q][i] for q in rest) == key for i in rows]]
        out.append(
            AxisPoints(
                sub,
                as_float(table.column(x_param))[sub],
                error[sub],
                x_param,
                dict(zip(rest, key, strict=True)),
            )
        )
    return out


def _side_points(axis: Axis, table: pa.Table, rows: list[int], policy: str) -> list[AxisPoints]:
    """(run, side) points: test_top1_at<R>, and test_top1 at the run's own side; a side is a level
    where some finished run of the group has a measured value there."""
    used = np.asarray(table.column("used").to_pylist(), dtype=bool)
    trained = as_float(table.column("resolution"))
    native = scored(table, METRIC, policy)
    out_rows, out_x, out_err = [], [], []
    for side in sorted(set(eval_resolutions(table)) | {int(v) for v in trained[rows] if np.isfinite(v)}):
        at = scored(table, at_resolution(METRIC, side), policy)
        value = np.where(np.isfinite(at), at, np.where(trained == side, native, np.nan))
        if not any(used[i] and np.isfinite(value[i]) for i in rows):
            continue
        keep = [i for i in rows if np.isfinite(value[i])]
        out_rows += keep
        out_x += [float(side)] * len(keep)
        out_err += [1.0 - value[i] for i in keep]
    if not out_rows:
        return []
    return [AxisPoints(np.asarray(out_rows), np.asarray(out_x), np.asarray(out_err), "test_top1_at<R>")]


def _has(column: str) -> Callable[[pa.Table], np.ndarray]:
    def rows(table: pa.Table) -> np.ndarray:
        return np.asarray([v is not None for v in column_values(table, column)], dtype=bool)

    return rows


def _owner_rows(kind: str, owner: str, declared: SearchAxis) -> Callable[[pa.Table], np.ndarray]:
    """The rows a declared axis applies to: the owner's (its `kind` column names it) that logged one
    of its fields and hold none of the values it means nothing at (an unlogged field: its default)."""
    params = [f"model.{owner}.{f}" for f in declared.settings]
    defaults = sections()[owner][1].model_fields

    def rows(table: pa.Table) -> np.ndarray:
        own = np.asarray([v == owner for v in column_values(table, kind)], dtype=bool)
        logged = np.zeros(table.num_rows, dtype=bool)
        for param in params:
            logged |= np.asarray([v is not None for v in column_values(table, param)], dtype=bool)
        for field_name, values in declared.unless.items():
            default = defaults[field_name].default
            held = column_values(table, f"model.{owner}.{field_name}")
            own &= np.asarray([(v if v is not None else default) not in values for v in held], dtype=bool)
        return own & logged

    return rows


def _declared_axis(kind: str, owner: str, declared: SearchAxis) -> Axis:
    """The Axis of a SearchAxis that mixer or regime `owner` declares."""
    return Axis(
        declared.name,
        declared.title,
        declared.xlabel,
        tuple(f"model.{owner}.{f}" for f in declared.settings),
        _owner_rows(kind, owner, declared),
        _param_points,
        declared.trend,
        AXIS_COSTS.get(declared.cost, ()) if declared.cost else (),
        {f"model.{owner}.{f}": label for f, label in declared.x_names.items()},
    )


GENERIC_AXES = (
    Axis(
        "resolution",
        "Test error vs training resolution",
        "training resolution (pixels per side)",
        ("data.resolution", "model.image_size"),
        _has("data.resolution"),
        _param_points,
        "power_law",
    ),
    Axis(
        "eval_resolution",
        "Test error vs evaluation resolution",
        "evaluation resolution (pixels per side; patch fixed)",
        (),
        _has("resolution"),
        _side_points,
        "log_linear_doubling",
    ),
)


def axes_table() -> dict[str, Axis]:
    """name -> Axis: every axis a registered mixer, then regime, declares, then the generic ones."""
    declared = [
        _declared_axis(kind, owner, axis)
        for kind, registry in (("mixer", MIXERS), ("regime", REGIMES))
        for owner, facts in registry.facts().items()
        for axis in facts.axes
    ]
    return {axis.name: axis for axis in (*declared, *GENERIC_AXES)}


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


@dataclass
class AxisLevel:
    """One level of a curve: test error (fraction) over its seeds, and its cost where the axis has one."""

    x: float
    error: tuple[float, float, int]  # mean, 95 % t half-width, n
    per_seed: dict = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)  # outcomes of the level's runs (outcomes.py)
    cost: tuple[float, float, int] | None = None  # NFE: mean, half-width, n
    riding: dict[str, Any] = field(default_factory=dict)  # other axis params at this level (atol beside rtol)


@dataclass
class AxisCurve:
    """One mixer × regime × fixed setting along one axis."""

    axis: str
    mixer: str | None
    regime: str | None
    x_param: str  # the param (or metric family) the x is read from
    fixed: dict[str, Any]  # what tells it from the axis's other curves of the same mixer × regime
    levels: list[AxisLevel]
    trend: AxisTrend
    cost_metric: str | None = None
    rows: list[int] = field(default_factory=list, repr=False)
    setting: dict[str, Any] = field(default_factory=dict, repr=False)  # every param it holds fixed

    @property
    def label(self) -> str:
        parts = [f"{self.mixer} · {self.regime}"]
        parts += [f"{k.removeprefix('model.')}={_show(v)}" for k, v in self.fixed.items()]
        return ", ".join(parts)


@dataclass
class AxisStudy:
    """The curves of one axis that varies in the study (each with >= 2 levels)."""

    axis: Axis
    curves: list[AxisCurve]
    policy: str
    metric: str = METRIC


def _inert(param_columns: list[str]) -> dict[str, tuple[str, str]]:
    """param -> ("mixer" | "regime", section) for the settings sections' params."""
    owners = sections()
    out = {}
    for c in param_columns:
        parts = c.split(".")
        if len(parts) == 3 and parts[0] == "model" and parts[1] in owners:
            out[c] = (owners[parts[1]][0], parts[1])
    return out


def setting_keys(table: pa.Table, param_columns: list[str], leave_out: tuple[str, ...]) -> list[str]:
    """Per run the configuration it shares with runs that differ only in `leave_out` and the seed."""
    cols = [
        c for c in param_columns if c not in SEED_COLUMNS and c not in leave_out and c in table.column_names
    ]
    inert = _inert(cols)
    values = {c: column_values(table, c) for c in cols}
    own = {"mixer": column_values(table, "mixer"), "regime": column_values(table, "regime")}
    keys = []
    for i in range(table.num_rows):
        key = {c: None if c in inert and own[inert[c][0]][i] != inert[c][1] else values[c][i] for c in cols}
        keys.append(json.dumps(key, sort_keys=True, default=str))
    return keys


def axis_study(
    runs: pa.Table,
    param_columns: list[str],
    axis: Axis,
    policy: str = "drop",
    *,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> AxisStudy | None:
    """The curves of `axis` over a `with_outcomes(with_fields(...))` table; None when it does not vary."""
    if METRIC not in runs.column_names:
        return None
    applies = axis.applies(runs)
    keys = setting_keys(runs, param_columns, axis.params)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        if applies[i]:
            groups.setdefault(k, []).append(i)
    curves = []
    for key, rows in groups.items():
        for pts in axis.points(axis, runs, rows, policy):
            if np.unique(pts.x[np.isfinite(pts.x)]).size >= 2:
                curves.append(_curve(axis, runs, json.loads(key), pts, n_boot, seed))
    if not curves:
        return None
    _name_fixed(curves, axis)
    regimes = regime_order([c.regime for c in curves if c.regime])
    mixers = mixer_order([c.mixer for c in curves if c.mixer])
    curves.sort(
        key=lambda c: (
            regimes.index(c.regime) if c.regime in regimes else -1,
            mixers.index(c.mixer) if c.mixer in mixers else -1,
            c.label,
        )
    )
    return AxisStudy(axis, curves, policy)


def axis_studies(
    runs: pa.Table, param_columns: list[str], policy: str = "drop", *, n_boot: int = N_BOOT, seed: int = 0
) -> list[AxisStudy]:
    """Every axis that varies in the study, in `axes_table()` order."""
    found = (
        axis_study(runs, param_columns, a, policy, n_boot=n_boot, seed=seed) for a in axes_table().values()
    )
    return [s for s in found if s is not None]


def _curve(axis: Axis, runs: pa.Table, key: dict, pts: AxisPoints, n_boot: int, seed: int) -> AxisCurve:
    seeds = column_values(runs, "seed")
    cost_metric = next(
        (m for m in axis.cost_metrics if np.isfinite(scored(runs, m, "drop")[pts.rows]).any()), None
    )
    cost = scored(runs, cost_metric, "drop") if cost_metric else None
    levels = []
    for x in np.unique(pts.x[np.isfinite(pts.x)]):
        at = pts.x == x
        rows = pts.rows[at]
        err = pts.error[at]
        per_seed = {seeds[i]: float(e) for i, e in zip(rows, err, strict=True) if np.isfinite(e)}
        mean, _, half, n = mean_ci(err)
        level = AxisLevel(float(x), (mean, half, n), per_seed, outcome_counts(runs, np.unique(rows)))
        if cost is not None:
            c_mean, _, c_half, c_n = mean_ci(cost[rows])
            level.cost = (c_mean, c_half, c_n)
        level.riding = {
            q: float(v[at][0])
            for q, v in pts.riding.items()
            if np.unique(v[at]).size == 1
            and not np.array_equal(v, pts.x)  # image_size = resolution: said once
        }
        levels.append(level)
    fixed = dict(pts.split)
    for q, v in pts.riding.items():  # an axis param constant along the curve is part of its setting
        if np.unique(v).size == 1:
            fixed[q] = float(v[0])
            for level in levels:
                level.riding.pop(q, None)
    ok = np.isfinite(pts.error)
    trend = fit_trend(
        axis.trend,
        pts.x[ok],
        pts.error[ok],
        [seeds[i] if seeds[i] is not None else f"run{i}" for i in pts.rows[ok]],
        n_levels=sum(np.isfinite(level.error[0]) for level in levels),
        n_boot=n_boot,
        seed=seed,
    )
    return AxisCurve(
        axis.name,
        key.get("model.mixer", _first(runs, "mixer", pts.rows)),
        key.get("model.regime", _first(runs, "regime", pts.rows)),
        pts.x_param,
        fixed,
        levels,
        trend,
        cost_metric,
        [int(i) for i in np.unique(pts.rows)],
        key,
    )


def _first(runs: pa.Table, column: str, rows: np.ndarray):
    return column_values(runs, column)[int(rows[0])] if rows.size else None


def _name_fixed(curves: list[AxisCurve], axis: Axis) -> None:
    """Name in `fixed` the settings that differ among the curves of one mixer × regime (before the
    axis params a curve holds fixed), so their labels tell them apart."""
    by_cell: dict[tuple, list[AxisCurve]] = {}
    for c in curves:
        by_cell.setdefault((c.mixer, c.regime), []).append(c)
    for cell in by_cell.values():
        names = sorted({k for c in cell for k in c.setting})
        seen: set[str] = set()
        differing = []
        for k in names:
            values = json.dumps([c.setting.get(k) for c in cell], default=str)
            if len({json.dumps(c.setting.get(k), default=str) for c in cell}) > 1 and values not in seen:
                differing.append(k)  # a param that only repeats another (image_size = resolution): once
                seen.add(values)
        for c in cell:
            c.fixed = {**{k: c.setting.get(k) for k in differing if k not in axis.params}, **c.fixed}


def _show(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)
