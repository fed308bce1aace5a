"""Is a tuned value at the edge of its searched range? The search may have stopped at a wall: the
best value could lie outside the range, and the arm is then under-tuned (DESIGN.md, "Scientific
standards": a tuned value at its range's edge is flagged).

A value is at an edge when it lies within `EDGE_FRACTION` (5 %) of the range's width from one end,
on the log scale for a log range (`loguniform`, `int` with `log: true`). An `int` range is judged
like a continuous one (`int: [1, 8]`: only 1 and 8 are within 5 %); its `step` changes nothing. A
listed distribution (`choice`, `grid`) is flagged only when it is an ordered set of numbers with an
interior (3 values or more) and the value is its smallest or largest: a categorical choice (names,
flags) or a choice of two has no edge. The range is read from a space entry as a study file and the
`spec.yaml` artifact write it (`{loguniform: [1.0e-4, 1.0e-2]}`), through `distribution_facts`, so
the tuning driver, `study show` and the analysis flag the same values with the same words.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from vitscale.distribution_facts import DISTRIBUTION_FACTS

EDGE_FRACTION = 0.05
_ROUNDING = 1e-9  # of the range's width: a value exactly at 5 % stays flagged through float rounding


@dataclass(frozen=True)
class RangeEdge:
    """Where a value sits: near the `lower` or `upper` end of its range (`bound`)."""

    side: str  # "lower" | "upper"
    bound: float | int  # the end it is near
    listed: bool = False  # the smallest or largest of listed values, not a range's end

    def describe(self, key: str, value: Any) -> str:
        """'train.lr=7.9e-3 within 5% of upper edge 8e-3', 'model.width=128 at the largest listed
        value'."""
        if self.listed:
            which = "smallest" if self.side == "lower" else "largest"
            return f"{key}={number(value)} at the {which} listed value"
        return f"{key}={number(value)} within {EDGE_FRACTION:.0%} of {self.side} edge {number(self.bound)}"

    def to_json(self, key: str, value: Any) -> dict[str, Any]:
        """How a record keeps it: {key, value, side, bound, text}."""
        return {
            "key": key,
            "value": value,
            "side": self.side,
            "bound": self.bound,
            "text": self.describe(key, value),
        }


def number(value: Any) -> str:
    """A value as people read it: ints as they are, floats to 3 significant digits, small or large
    ones as 7.9e-3 (no padded exponent)."""
    if not _is_number(value) or isinstance(value, int):
        return str(value)
    if value != 0 and not 1e-2 <= abs(value) < 1e4:
        mantissa, exponent = f"{value:.2e}".split("e")
        return f"{float(mantissa):g}e{int(exponent)}"
    return f"{value:.3g}" if abs(value) < 1e3 else f"{value:.0f}"


def range_edge(
    value: Any, low: float, high: float, *, log_scale: bool = False, fraction: float = EDGE_FRACTION
) -> RangeEdge | None:
    """The edge of [low, high] that `value` lies within `fraction` of the width from, or None (a
    value in the middle, a non-number, an empty range). Outside the range counts as at its edge."""
    if not _is_number(value) or not high > low:
        return None
    where, lo, hi = float(value), float(low), float(high)
    if log_scale:
        if lo <= 0 or where <= 0:
            return None
        where, lo, hi = math.log(where), math.log(lo), math.log(hi)
    margin = (hi - lo) * (fraction + _ROUNDING)
    if where <= lo + margin:
        return RangeEdge("lower", low)
    if where >= hi - margin:
        return RangeEdge("upper", high)
    return None


def space_edge(value: Any, entry: Any) -> RangeEdge | None:
    """The edge `value` sits at in a space entry ({loguniform: [a, b]}, {int: [1, 8], log: true},
    {grid: [32, 64, 128]}, ...), or None; an entry that names no distribution has none."""
    if not isinstance(entry, Mapping):
        return None
    name = next((n for n in DISTRIBUTION_FACTS if n in entry), None)
    if name is None or not _is_number(value):
        return None
    facts, given = DISTRIBUTION_FACTS[name], entry[name]
    if facts.listed:
        return _listed_edge(value, given)
    if not isinstance(given, list | tuple) or len(given) != 2 or not all(map(_is_number, given)):
        return None
    log_scale = facts.log_scale or (facts.integer and bool(entry.get("log")))
    return range_edge(value, given[0], given[1], log_scale=log_scale)


def _listed_edge(value: Any, given: Any) -> RangeEdge | None:
    if not isinstance(given, list | tuple) or len(given) < 3 or not all(map(_is_number, given)):
        return None  # names, flags, mappings, or no interior
    low, high = min(given), max(given)
    if value == low:
        return RangeEdge("lower", low, listed=True)
    if value == high:
        return RangeEdge("upper", high, listed=True)
    return None


def point_edges(point: Mapping[str, Any] | None, space: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every value of a tuned `point` at an edge of its entry in `space` (dotted key -> entry as
    written), as records (`RangeEdge.to_json`), in the point's order."""
    out = []
    for key, value in (point or {}).items():
        edge = space_edge(value, space.get(key))
        if edge is not None:
            out.append(edge.to_json(key, value))
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
