"""Comparison studies: per arm the tuning budget it used, its tuned configuration, a flag for each
searched parameter whose tuned value sits at the edge of its range (`vitscale.range_edge`: the
search may have stopped at a wall, the real optimum could lie outside, and that arm is then
under-tuned), and, where it was tuned at low fidelity, its confirmation at full fidelity (the
record `tune.confirmation` logged: both rankings, Spearman's ρ, whether the choice changed).
"""

from __future__ import annotations

import pyarrow as pa

from vitscale.analysis.load.outcomes import outcome_counts
from vitscale.analysis.statistics.arms import Arm
from vitscale.range_edge import space_edge


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


def add_tuning(
    table: pa.Table, arms: list[Arm], space: dict | None, confirmation: dict | None = None
) -> None:
    """Fill `arm.tuning`: tune-phase outcome counts (the budget), the tuned values, edge flags
    ({key: RangeEdge}) and the arm's confirmation record (`confirmation`: {arm tag: record}) or None."""
    phase, arm_tag = table.column("phase").to_pylist(), table.column("arm").to_pylist()
    for arm in arms:
        tune_rows = [
            i for i, (p, a) in enumerate(zip(phase, arm_tag, strict=True)) if p == "tune" and a == arm.label
        ]
        keys = searched_keys(space, arm)
        tuned = {k: arm.config.get(k) for k in keys}
        edges = {k: e for k in keys if (e := space_edge(tuned[k], space[k])) is not None}
        arm.tuning = {
            "budget": outcome_counts(table, tune_rows),
            "tuned": tuned,
            "edges": edges,
            "confirmation": (confirmation or {}).get(arm.label),
        }
