"""The study's other axes as scaling curves: test error against SSoG's number of Gaussians, the ODE
solver's tolerance (with the NFE it cost), the training resolution and the evaluation side.

A curve compares only runs that differ in its axis alone: runs are grouped by every param except
the seeds and the axis's own params, so a width or learning rate that also varies makes separate
curves, never a pooled one. A mixer's or regime's settings section (`model.ssog.*`, `model.ode.*`)
does nothing on another mixer's or regime's rows, so it does not split those (a study crossing
attention with `model.ssog.num_gaussians` has one attention curve, not one per K). Per level: the
test error (1 − test_top1, failed runs dropped or scored as chance by the policy) as mean ± 95 %
t-interval over seeds, n, and the outcomes of the level's runs. A trend is fitted only through
>= MIN_TREND_LEVELS levels with results (axes_trends); with fewer the curve says why. An axis that
no group varies (< 2 levels) yields no study at all: no figure, no section. The axes themselves,
and how each reads its levels (tolerance: rtol with atol riding along; evaluation sides), are in
analysis.axes_levels.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import SEED_COLUMNS
from vitscale.analysis.load.outcomes import outcome_counts, scored
from vitscale.analysis.statistics.aggregate import mean_ci
from vitscale.analysis.statistics.axes_levels import AXES, METRIC, Axis, AxisPoints, column_values
from vitscale.analysis.statistics.axes_trends import N_BOOT, AxisTrend, fit_trend
from vitscale.models.registry import mixer_order, regime_order, sections


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
    """Every registered axis that varies in the study, in AXES order."""
    found = (axis_study(runs, param_columns, a, policy, n_boot=n_boot, seed=seed) for a in AXES.values())
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
