"""Comparison studies: per arm the tuning budget it used, its tuned configuration, and a flag for
each searched parameter whose tuned value sits at the edge of its range (the search may have
stopped at a wall: the real optimum could lie outside, and that arm is then under-tuned).
"""

from __future__ import annotations

import math

import pyarrow as pa

from vitscale.analysis.load.outcomes import outcome_counts
from vitscale.analysis.statistics.arms import Arm
from vitscale.distribution_facts import DISTRIBUTION_FACTS

EDGE_FRACTION = 0.05  # within 5 % of the range (in log space for loguniform) counts as the edge


def edge(value, dist: dict) -> str | None:
    """'low' / 'high' when `value` is at an end of the distribution's range, else None.

    Lists are only ordered when numeric, and need an interior (3 values or more): a categorical
    choice, or a choice of two, has no edge to warn about.
    """
    if value is None or not isinstance(dist, dict):
        return None
    kind = next((k for k in DISTRIBUTION_FACTS if k in dist), None)
    if kind is None or not isinstance(value, int | float) or isinstance(value, bool):
        return None
    bounds, facts = dist[kind], DISTRIBUTION_FACTS[kind]
    if facts.listed:
        nums = [v for v in bounds if isinstance(v, int | float) and not isinstance(v, bool)]
        if len(nums) < 3 or len(nums) != len(bounds):
            return None
        lo, hi = min(nums), max(nums)
        return "low" if value == lo else "high" if value == hi else None
    lo, hi = float(bounds[0]), float(bounds[1])
    if facts.integer:
        return "low" if value <= lo else "high" if value >= hi else None
    if facts.log_scale and lo > 0 and value > 0:
        lo, hi, value = math.log(lo), math.log(hi), math.log(value)
    span = (hi - lo) * EDGE_FRACTION
    return "low" if value <= lo + span else "high" if value >= hi - span else None


def searched_keys(space: dict | None, arm: Arm) -> list[str]:
    """The space's dotted parameters tuned within this arm: not its own keys, and only where the
    entry's `when:` condition holds for the arm's configuration."""
    if not isinstance(space, dict):
        return []
    out = []
    for k, v in space.items():
        if not isinstance(v, dict) or k in arm.key:
            continue
        when = v.get("when") if isinstance(v.get("when"), dict) else {}
        if all(str(arm.config.get(ck)) == str(cv) for ck, cv in when.items()):
            out.append(k)
    return sorted(out)


def add_tuning(table: pa.Table, arms: list[Arm], space: dict | None) -> None:
    """Fill `arm.tuning`: tune-phase outcome counts (the budget), the tuned values and edge flags."""
    phase, arm_tag = table.column("phase").to_pylist(), table.column("arm").to_pylist()
    for arm in arms:
        tune_rows = [
            i for i, (p, a) in enumerate(zip(phase, arm_tag, strict=True)) if p == "tune" and a == arm.label
        ]
        keys = searched_keys(space, arm)
        tuned = {k: arm.config.get(k) for k in keys}
        edges = {k: e for k in keys if (e := edge(tuned[k], space[k])) is not None}
        arm.tuning = {"budget": outcome_counts(table, tune_rows), "tuned": tuned, "edges": edges}
