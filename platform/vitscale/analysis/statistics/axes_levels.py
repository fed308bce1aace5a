"""The axes a study can vary besides size, and how each reads its levels from the runs table.

Each axis names the params it owns (left out of the setting key, analysis.axes), the runs it
applies to, how a group's runs become (run, x, error) points, its trend model and its cost metric.
- num_gaussians: `model.ssog.num_gaussians` on SSoG rows; power law.
- tolerance: the (rtol, atol) pair of an adaptive ODE solver (fixed-grid solvers ignore both). The
  x is rtol when it tells the pairs apart (atol rides along, shown per level), else atol; a full
  rtol × atol grid becomes one rtol curve per atol. Cost: NFE (test's, else val's, else the last
  training epoch's). Log-linear per decade.
- resolution: `data.resolution` (`model.image_size` follows it); power law.
- eval_resolution: the sides a group's runs were evaluated at (`test_top1_at<R>`) plus the side
  they were trained at (`test_top1`); one curve per training setting; log-linear per doubling.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.load.outcomes import scored
from vitscale.analysis.statistics.resolution import eval_resolutions
from vitscale.models.regimes.ode import FIXED_GRID_SOLVERS
from vitscale.train.metrics import at_resolution

METRIC = "test_top1"  # the error is 1 − this: reported, nothing selects on it
# The cost beside the tolerance, the first one logged: test's NFE (the split the error is on), else
# validation's, else the last training epoch's forwards.
NFE_METRICS = ("test_nfe_mean", "val_nfe_mean", "nfe_mean")


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
    trend: str  # a key of axes_trends.TRENDS
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


def _adaptive_ode(table: pa.Table) -> np.ndarray:
    """ODE rows of an adaptive solver (rtol/atol mean nothing to a fixed grid); solver unlogged: dopri5."""
    regimes, solvers = column_values(table, "regime"), column_values(table, "model.ode.solver")
    return np.asarray(
        [
            r == "ode" and (s or "dopri5") not in FIXED_GRID_SOLVERS
            for r, s in zip(regimes, solvers, strict=True)
        ],
        dtype=bool,
    )


AXES: dict[str, Axis] = {
    axis.name: axis
    for axis in (
        Axis(
            "num_gaussians",
            "Test error vs number of Gaussians (SSoG)",
            "Gaussians per head and axis (K)",
            ("model.ssog.num_gaussians",),
            _has("ssog.num_gaussians"),
            _param_points,
            "power_law",
        ),
        Axis(
            "tolerance",
            "Test error and NFE vs ODE solver tolerance",
            "solver tolerance",
            ("model.ode.rtol", "model.ode.atol"),
            _adaptive_ode,
            _param_points,
            "log_linear_decade",
            NFE_METRICS,
            {"model.ode.rtol": "relative tolerance (rtol)", "model.ode.atol": "absolute tolerance (atol)"},
        ),
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
}
