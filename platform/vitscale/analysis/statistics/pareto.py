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

from vitscale.analysis.load.fields import as_float
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
