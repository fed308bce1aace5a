"""Whether an axis varies: a figure or a report section along an axis with one value says nothing.

`accuracy_vs_nfe` over ODE configurations that all took the same NFE is one column of points, and a
"scaling" figure of a study with one width per mixer × regime has no curve to fit; both are left
out, the report saying why in one line where it matters.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vitscale.analysis.load.fields import as_float


def _used(table: pa.Table) -> pa.Table:
    return table.filter(pc.greater(table.column("n_used"), 0)) if "n_used" in table.column_names else table


def distinct_values(table: pa.Table, column: str) -> list[float]:
    """The distinct finite values of `column` over the measured rows (n_used > 0), sorted."""
    if column not in table.column_names:
        return []
    values = as_float(_used(table).column(column))
    return sorted({float(v) for v in values if np.isfinite(v)})


def varies(table: pa.Table, column: str) -> bool:
    """At least two distinct finite values of `column` over the measured rows."""
    return len(distinct_values(table, column)) >= 2


def varies_within(table: pa.Table, column: str, groups: tuple[str, ...] = ("mixer", "regime")) -> bool:
    """Some group (default mixer × regime) holds two distinct finite values of `column`: what a
    per-group curve (a scaling law in parameters) needs."""
    rows = _used(table)
    if column not in rows.column_names:
        return False
    keys = list(zip(*(rows.column(g).to_pylist() for g in groups), strict=True))
    seen: dict[tuple, set[float]] = {}
    for key, value in zip(keys, as_float(rows.column(column)), strict=True):
        if np.isfinite(value):
            seen.setdefault(key, set()).add(float(value))
    return any(len(v) >= 2 for v in seen.values())
