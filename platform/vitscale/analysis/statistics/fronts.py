"""Pareto fronts: the non-dominated rows of a table under several objectives, each max or min.

Definition. Point p dominates q when p is at least as good as q on every objective and strictly
better on at least one. The front is every row that no other row dominates. Consequences, chosen
on purpose:
- duplicates: identical points never dominate each other, so every copy of a front point is on
  the front (each replicate run or configuration that achieves it is reported);
- ties on one axis: of two points equal on one objective, the one better on the other dominates;
- rows with NaN (or null) in any objective are dropped with a `ParetoNaNWarning` — they cannot be
  compared, and silently keeping or dropping them would both mislead.
Two objectives run in O(n log n) (sort and sweep); more objectives use blocked pairwise tests.

The study's fronts (train_fronts, bench_fronts): Pareto fronts over configuration aggregates,
written as `pareto_<x>_<y>.csv`.

Training studies: one global front per pair (accuracy vs params, FLOPs, and NFE over the configurations
of regimes that count it), across every mixer and regime, so the CSV says which mixer owns which part of it.
Benchmark studies compare configurations measured side by side, so fronts are taken per regime x
resolution (x setting): the fastest, the leanest, and the throughput-memory trade-off.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from vitscale.analysis.load.fields import SEED_COLUMNS, as_float, descriptive_fields, identity_sources
from vitscale.analysis.statistics.aggregate import COUNT_COLUMNS
from vitscale.models.registry import REGIMES
from vitscale.pareto import pareto_mask

__all__ = ["ParetoNaNWarning", "pareto_front", "pareto_indices", "pareto_mask"]

Objective = tuple[str | int, str]  # (column name or index, "max" | "min")


class ParetoNaNWarning(UserWarning):
    """Rows with a missing objective value were left out of a Pareto front."""


def pareto_indices(data: pa.Table | Mapping | np.ndarray, objectives: Sequence[Objective]) -> np.ndarray:
    """Row indices (ascending) of the front; rows with NaN in an objective are dropped with a warning."""
    if not objectives:
        raise ValueError("pareto_front needs at least one objective")
    for _, sense in objectives:
        if sense not in ("max", "min"):
            raise ValueError(f"objective direction must be 'max' or 'min', got {sense!r}")
    cols = np.column_stack([_column(data, name) for name, _ in objectives])
    finite = ~np.isnan(cols).any(axis=1)
    if not finite.all():
        names = ", ".join(str(name) for name, _ in objectives)
        warnings.warn(
            f"pareto_front: dropped {int((~finite).sum())} of {len(finite)} rows with NaN in ({names})",
            ParetoNaNWarning,
            stacklevel=3,
        )
    rows = np.flatnonzero(finite)
    mask = pareto_mask(cols[rows], [sense == "max" for _, sense in objectives])
    return rows[mask]


def pareto_front(data: pa.Table | Mapping | np.ndarray, objectives: Sequence[Objective]):
    """The non-dominated rows of `data`, in their original order, as the same kind of container.

    `data`: a pyarrow Table or a mapping of name -> array (objectives name columns) or a 2-D
    numpy array (objectives give column indices). Example: `pareto_front(t, [("val_top1_mean",
    "max"), ("params_mean", "min")])`.
    """
    idx = pareto_indices(data, objectives)
    if isinstance(data, pa.Table):
        return data.take(pa.array(idx, pa.int64()))
    if isinstance(data, Mapping):
        return {k: np.asarray(v)[idx] for k, v in data.items()}
    return np.asarray(data)[idx]


def _column(data: pa.Table | Mapping | np.ndarray, name: str | int) -> np.ndarray:
    if isinstance(data, pa.Table):
        return as_float(data.column(name))
    if isinstance(data, Mapping):
        col = np.asarray(data[name])
        if col.dtype == object:
            return np.array([np.nan if v is None else v for v in col], dtype=float)
        return col.astype(float)
    return np.asarray(data, dtype=float)[:, name]


TRAIN_FRONTS = (("params", "val_top1"), ("flops_per_image", "val_top1"), ("nfe_mean", "val_top1"))
BENCH_FRONTS = (
    ("resolution", "images_per_second", [("images_per_second", "max")]),
    ("resolution", "peak_memory_mb", [("peak_memory_mb", "min")]),
    ("peak_memory_mb", "images_per_second", [("images_per_second", "max"), ("peak_memory_mb", "min")]),
)


@dataclass
class Front:
    """One front: `x`, `y` are metric names; `table` holds its aggregate rows sorted by x."""

    x: str
    y: str
    table: pa.Table
    path: Path | None = None

    @property
    def name(self) -> str:
        return f"{self.x}_{self.y}"


def setting_columns(agg: pa.Table, param_columns: list[str]) -> list[str]:
    """Params that vary across a benchmark apart from mixer/regime/resolution/backend: they split curves."""
    out = []
    for c in param_columns:
        if c in identity_sources() or c in SEED_COLUMNS or c not in agg.column_names:
            continue
        if len(set(agg.column(c).to_pylist())) > 1:
            out.append(c)
    return out


def splitting_settings(
    agg: pa.Table, param_columns: list[str], cell=("mixer", "regime", "width")
) -> list[str]:
    """The setting columns that take several values inside one mixer x regime x width cell (a
    study's other axes, e.g. train.distill.weight); not those that only follow the cell (a
    per-mixer teacher path)."""
    cols = [c for c in cell if c in agg.column_names]
    keys = list(zip(*(agg.column(c).to_pylist() for c in cols), strict=True)) or [()] * agg.num_rows
    out = []
    for c in setting_columns(agg, param_columns):
        seen: dict[tuple, set] = {}
        for key, value in zip(keys, agg.column(c).to_pylist(), strict=True):
            seen.setdefault(key, set()).add(str(value))
        if any(len(values) > 1 for values in seen.values()):
            out.append(c)
    return out


def with_setting(agg: pa.Table, param_columns: list[str]) -> pa.Table:
    """Add `setting`: "k=v, ..." over the setting columns ("" when nothing else varies)."""
    cols = setting_columns(agg, param_columns)
    values = [agg.column(c).to_pylist() for c in cols]
    labels = [
        ", ".join(f"{c}={v[i]}" for c, v in zip(cols, values, strict=True)) for i in range(agg.num_rows)
    ]
    return agg.append_column("setting", pa.array(labels, pa.string()))


def nfe_rows(table: pa.Table) -> pa.Table:
    """The rows of regimes that count function evaluations (`counts_nfe`): NFE means nothing elsewhere."""
    counting = [name for name, facts in REGIMES.facts().items() if facts.counts_nfe]
    return table.filter(pc.is_in(table.column("regime"), pa.array(counting, pa.string())))


def train_fronts(agg: pa.Table) -> list[Front]:
    """Max mean top-1 against min mean cost, over configurations with at least one finished run."""
    done = agg.filter(pc.greater(agg.column("n_used"), 0))
    fronts = []
    for x, y in TRAIN_FRONTS:
        xm, ym = f"{x}_mean", f"{y}_mean"
        if xm not in done.column_names or ym not in done.column_names:
            continue
        rows = nfe_rows(done) if x == "nfe_mean" else done
        if not np.isfinite(as_float(rows.column(xm))).any():
            continue
        idx = pareto_indices(rows, [(ym, "max"), (xm, "min")])
        fronts.append(Front(x, y, _sorted(rows.take(pa.array(idx, pa.int64())), [xm, ym])))
    return fronts


def bench_fronts(agg: pa.Table) -> list[Front]:
    """Per regime x resolution x setting (a `with_setting` table): fastest, leanest, and the trade-off."""
    done = agg.filter(pc.greater(agg.column("n_used"), 0))
    keys = ["regime", "resolution", "setting"]
    cells: dict[tuple, list[int]] = {}
    for i, row in enumerate(zip(*(done.column(k).to_pylist() for k in keys), strict=True)):
        cells.setdefault(tuple(row), []).append(i)
    fronts = []
    for x, y, objectives in BENCH_FRONTS:
        cols = [f"{name}_mean" for name, _ in objectives]
        if any(c not in done.column_names for c in cols):
            continue
        chosen: list[int] = []
        for idx in cells.values():
            cell = done.take(pa.array(idx, pa.int64()))
            if not np.isfinite(np.column_stack([as_float(cell.column(c)) for c in cols])).all(axis=1).any():
                continue  # the whole cell went out of memory: no front there
            chosen += [idx[j] for j in pareto_indices(cell, [(f"{n}_mean", s) for n, s in objectives])]
        table = done.take(pa.array(sorted(chosen), pa.int64()))
        fronts.append(Front(x, y, _sorted(table, [*keys, "series"])))
    return fronts


def _sorted(table: pa.Table, by: list[str]) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in by]) if table.num_rows else table


def front_csv_columns(front: Front, table: pa.Table, param_columns: list[str]) -> list[str]:
    """What a front CSV holds: identity, the two axes' statistics, counts, run ids, then the config."""
    cols = [c for c in (*descriptive_fields(), "series", "setting") if c in table.column_names]
    for metric in dict.fromkeys([front.x, front.y]):
        cols += [
            f"{metric}_{s}" for s in ("mean", "std", "ci95", "n") if f"{metric}_{s}" in table.column_names
        ]
    cols += [*COUNT_COLUMNS, "run_ids", "group_key"]
    cols += [c for c in param_columns if c in table.column_names and c not in cols]
    return cols


def write_front(front: Front, out_dir: Path, param_columns: list[str]) -> Path:
    """`out_dir/pareto_<x>_<y>.csv` with one row per front point."""
    path = out_dir / f"pareto_{front.name}.csv"
    pacsv.write_csv(front.table.select(front_csv_columns(front, front.table, param_columns)), path)
    front.path = path
    return path
