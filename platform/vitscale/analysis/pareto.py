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
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa

from vitscale.analysis.fields import as_float

Objective = tuple[str | int, str]  # (column name or index, "max" | "min")


class ParetoNaNWarning(UserWarning):
    """Rows with a missing objective value were left out of a Pareto front."""


def pareto_mask(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of a finite (n, k) array; `maximize[j]` per column."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[1] != len(maximize):
        raise ValueError(f"values must be (n, {len(maximize)}), got {v.shape}")
    v = np.where(np.asarray(maximize, dtype=bool), -v, v)  # everything minimised from here on
    n, k = v.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    if k == 1:
        return v[:, 0] == v[:, 0].min()
    if k == 2:
        return _front_2d(v[:, 0], v[:, 1])
    return _front_nd(v)


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sort by (x, y); a point survives if it has its x-group's smallest y and beats every smaller x."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    group = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1
    group_min = ys[starts]  # sorted by y inside a group
    best_before = np.r_[np.inf, np.minimum.accumulate(group_min)[:-1]]  # over strictly smaller x
    keep = (ys == group_min[group]) & (group_min[group] < best_before[group])
    mask = np.zeros(x.size, dtype=bool)
    mask[order] = keep
    return mask


def _front_nd(v: np.ndarray, block: int = 512) -> np.ndarray:
    dominated = np.zeros(v.shape[0], dtype=bool)
    for start in range(0, v.shape[0], block):
        q = v[start : start + block, None, :]  # candidates, (b, 1, k)
        le = (v[None, :, :] <= q).all(axis=2)  # every other point no worse ...
        lt = (v[None, :, :] < q).any(axis=2)  # ... and better somewhere
        dominated[start : start + block] = (le & lt).any(axis=1)
    return ~dominated


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
