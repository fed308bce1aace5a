"""Best-so-far of a search against the compute it spent: does the searcher find good recipes early?

Per line (the study's searcher, and per arm where a comparison tunes several), the search trials in
the order they started (the order the searcher proposed them; Ray results carry no end time), x the
cumulative training compute they spent (`train_flops`; runs that logged none: `images_seen`; else
the trial count), y the best objective reached so far (its mode: max or min). Failed and
stopped-early trials spend compute but score only where they logged the objective.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float

SEARCH_PHASES = (None, "tune")  # a train study's trials (no phase), a comparison's tuning phase
X_SOURCES = ("train_flops", "images_seen")  # the compute each trial spent, first one every trial logged
TRIALS = "trials"  # x when no compute was logged: trials run
NEAR_BEST = 0.99  # the table's compute to reach 99 % of the final best (of its distance from zero)
UNSEARCHED = ("grid",)  # algorithms that do not choose where to look next: no best-so-far curve
POPULATION = ("pbt", "pb2")  # schedulers that search by evolving the points (a grid-started PBT too)


@dataclass(frozen=True)
class SearchLine:
    """One searcher's (and arm's) best-so-far curve."""

    searcher: str  # e.g. "tpe", "random+pbt"
    arm: str | None  # a comparison's arm tag, None for a study searched as one
    x: np.ndarray  # cumulative compute after each trial
    best: np.ndarray  # best objective so far after each trial (nan until the first score)
    x_unit: str  # one of X_SOURCES or TRIALS
    mode: str  # "max" | "min"

    @property
    def final(self) -> float:
        return float(self.best[-1]) if self.best.size else float("nan")

    def compute_to_reach(self, share: float = NEAR_BEST) -> float:
        """The compute spent when the best first came within `share` of its final value (max: at
        least share × final; min: at most final / share)."""
        final = self.final
        if not np.isfinite(final):
            return float("nan")
        target = share * final if self.mode == "max" else final / share
        hit = self.best >= target if self.mode == "max" else self.best <= target
        hit &= np.isfinite(self.best)
        return float(self.x[np.argmax(hit)])


def searcher_name(searcher: dict | None) -> str | None:
    """'tpe', 'random+pbt' (the scheduler where it evolves the points); None when not recorded."""
    if not isinstance(searcher, dict) or not searcher.get("algorithm"):
        return None
    scheduler = searcher.get("scheduler")
    name = str(searcher["algorithm"])
    return f"{name}+{scheduler}" if scheduler in POPULATION else name


def _x_unit(runs: pa.Table, rows: list[int]) -> str:
    for name in X_SOURCES:
        if name in runs.column_names and np.isfinite(as_float(runs.column(name))[rows]).all():
            return name
    return TRIALS


def search_lines(
    runs: pa.Table, searcher: dict | None, default_objective: tuple[str, str]
) -> list[SearchLine]:
    """The best-so-far lines of a study that searched; none for grid studies or an unrecorded searcher."""
    name = searcher_name(searcher)
    grid = searcher is not None and searcher.get("algorithm") in UNSEARCHED
    if name is None or (grid and searcher.get("scheduler") not in POPULATION) or not runs.num_rows:
        return []
    objective = searcher.get("objective") or {}
    metric = objective.get("metric") or default_objective[0]
    mode = objective.get("mode") or default_objective[1]
    if metric not in runs.column_names:
        return []
    phase = runs.column("phase").to_pylist()
    arm = runs.column("arm").to_pylist()
    start = runs.column("start_time").to_pylist()
    score = as_float(runs.column(metric))
    groups: dict[str | None, list[int]] = {}
    for i in range(runs.num_rows):
        if phase[i] in SEARCH_PHASES:
            groups.setdefault(arm[i], []).append(i)
    lines = []
    for tag, rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        rows = sorted(rows, key=lambda i: (start[i] or 0, i))
        unit = _x_unit(runs, rows)
        spent = np.ones(len(rows)) if unit == TRIALS else as_float(runs.column(unit))[rows]
        s = score[rows]
        pick = np.fmax if mode == "max" else np.fmin  # fmax/fmin skip nan: a failed trial keeps the best
        best = pick.accumulate(s) if s.size else s
        lines.append(SearchLine(name, tag, np.cumsum(spent), best, unit, mode))
    return lines
