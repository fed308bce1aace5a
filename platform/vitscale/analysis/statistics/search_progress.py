"""Best-so-far of a search against the compute it spent: does the searcher find good recipes early?

Per line (each execution's searcher and sampler seed, and per arm where a comparison tunes several;
executions of one study run with other searchers or seeds add lines), the search trials in
the order they started (the order the searcher proposed them; Ray results carry no end time), x the
cumulative training compute they spent (`train_flops`; runs that logged none: `images_seen`; else
the trial count), y the best objective reached so far (its mode: max or min). Failed and
stopped-early trials spend compute but score only where they logged the objective. A population
(PBT, PB2) trains its members side by side, waiting for each other at every perturbation, so no
member has a final score before the population has spent its compute: each of its members is
placed at the population's total (one step, at the end), not at its start order's running sum.

Searchers are compared at equal compute (`searcher_summaries`): every line of an arm is read at
the least compute any of them spent, averaged over sampler seeds, against TPE's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from scipy import stats

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.statistics.aggregate import mean_ci

SEARCH_PHASES = (None, "tune")  # a train study's trials (no phase), a comparison's tuning phase
X_SOURCES = ("train_flops", "images_seen")  # the compute each trial spent, first one every trial logged
TRIALS = "trials"  # x when no compute was logged: trials run
NEAR_BEST = 0.99  # the table's compute to reach 99 % of the final best (of its distance from zero)
UNSEARCHED = ("grid",)  # algorithms that do not choose where to look next: no best-so-far curve
POPULATION = ("pbt", "pb2")  # schedulers that search by evolving the points (a grid-started PBT too)
REFERENCE_SEARCHER = "tpe"  # the searcher every other is compared with at equal compute


@dataclass(frozen=True)
class SearchLine:
    """One searcher's (and arm's) best-so-far curve."""

    searcher: str  # e.g. "tpe", "random+pbt"
    arm: str | None  # a comparison's arm tag, None for a study searched as one
    x: np.ndarray  # cumulative compute after each trial
    best: np.ndarray  # best objective so far after each trial (nan until the first score)
    x_unit: str  # one of X_SOURCES or TRIALS
    mode: str  # "max" | "min"
    sampler_seed: int | None = None  # the execution's search.sampler_seed

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
    runs: pa.Table,
    searcher: dict | None,
    default_objective: tuple[str, str],
    searchers: dict[str, dict] | None = None,
) -> list[SearchLine]:
    """The best-so-far lines of a study that searched: one per (searcher, sampler seed, arm), each
    run's searcher read from its execution (`searchers`, by parent run id; else the study's own).
    None for grid studies or an unrecorded searcher."""
    if not runs.num_rows:
        return []
    objective = (searcher or {}).get("objective") or {}
    metric = objective.get("metric") or default_objective[0]
    mode = objective.get("mode") or default_objective[1]
    if metric not in runs.column_names:
        return []
    searchers = searchers or {}
    phase = runs.column("phase").to_pylist()
    arm = runs.column("arm").to_pylist()
    parent = runs.column("parent_run_id").to_pylist()
    start = runs.column("start_time").to_pylist()
    score = as_float(runs.column(metric))
    groups: dict[tuple, list[int]] = {}
    for i in range(runs.num_rows):
        own = searchers.get(parent[i]) or searcher
        name = searcher_name(own) if _searched(own) else None
        if phase[i] in SEARCH_PHASES and name is not None:
            groups.setdefault((name, own.get("sampler_seed"), arm[i]), []).append(i)
    lines = []
    for (name, seed, tag), rows in sorted(groups.items(), key=lambda kv: tuple(map(str, kv[0]))):
        rows = sorted(rows, key=lambda i: (start[i] or 0, i))
        unit = _x_unit(runs, rows)
        spent = np.ones(len(rows)) if unit == TRIALS else as_float(runs.column(unit))[rows]
        x = np.cumsum(spent)
        if _is_population(name):
            x = np.full_like(x, x[-1])
        s = score[rows]
        pick = np.fmax if mode == "max" else np.fmin  # fmax/fmin skip nan: a failed trial keeps the best
        best = pick.accumulate(s) if s.size else s
        lines.append(SearchLine(name, tag, x, best, unit, mode, seed))
    return lines


def _is_population(name: str) -> bool:
    return name.rpartition("+")[2] in POPULATION


def _searched(searcher: dict | None) -> bool:
    """A searcher that chooses where to look (a sampler, or a grid evolved by PBT)."""
    if searcher_name(searcher) is None:
        return False
    return searcher.get("algorithm") not in UNSEARCHED or searcher.get("scheduler") in POPULATION


@dataclass(frozen=True)
class SearcherSummary:
    """One searcher's lines over its sampler seeds (for one arm), read at the compute every line of
    the arm reached, so searchers are compared at equal compute."""

    searcher: str
    arm: str | None
    seeds: int
    trials: float  # mean trials per seed
    spent: float  # mean compute per seed
    equal_compute: float  # the least compute any line of this arm spent
    at_equal: tuple[float, float, float, int]  # best at equal_compute: mean, sd, CI half-width, n
    final: tuple[float, float, float, int]  # best at the line's end: mean, sd, CI half-width, n
    to_reach: float  # median compute to come within NEAR_BEST of the line's own final best
    x_unit: str
    mode: str
    versus: tuple[float, float] | None = None  # at_equal minus the reference searcher's: (mean, CI half)


def best_at(line: SearchLine, compute: float) -> float:
    """The line's best score once it had spent `compute` (nan before its first trial ended)."""
    return float(best_along(line.x, line.best, np.array([compute]))[0])


def best_along(x: np.ndarray, best: np.ndarray, at: np.ndarray) -> np.ndarray:
    """A best-so-far step line (`best` after cumulative compute `x`) read at each of `at`."""
    k = np.searchsorted(x, at * (1 + 1e-9), side="right")
    padded = np.concatenate([[np.nan], best])
    return padded[k]


def searcher_summaries(lines: list[SearchLine], reference: str = REFERENCE_SEARCHER) -> list[SearcherSummary]:
    """Per (searcher, arm): the mean over sampler seeds of the best reached at equal compute and at
    the end, and the difference from `reference` (Welch's t interval) where it ran on the arm."""
    by_arm: dict[str | None, list[SearchLine]] = {}
    for line in lines:
        by_arm.setdefault(line.arm, []).append(line)
    out = []
    for arm, arm_lines in by_arm.items():
        equal = min(float(ln.x[-1]) for ln in arm_lines if ln.x.size)
        groups: dict[str, list[SearchLine]] = {}
        for line in arm_lines:
            groups.setdefault(line.searcher, []).append(line)
        at_equal = {name: np.array([best_at(ln, equal) for ln in g]) for name, g in groups.items()}
        for name, group in groups.items():
            versus = None
            if reference in at_equal and name != reference:
                versus = welch_difference(at_equal[name], at_equal[reference])
            out.append(
                SearcherSummary(
                    searcher=name,
                    arm=arm,
                    seeds=len(group),
                    trials=float(np.mean([ln.best.size for ln in group])),
                    spent=float(np.mean([ln.x[-1] for ln in group])),
                    equal_compute=equal,
                    at_equal=mean_ci(at_equal[name]),
                    final=mean_ci(np.array([ln.final for ln in group])),
                    to_reach=float(np.nanmedian([ln.compute_to_reach() for ln in group])),
                    x_unit=group[0].x_unit,
                    mode=group[0].mode,
                    versus=versus,
                )
            )
    return sorted(out, key=lambda s: (str(s.arm), s.searcher != reference, s.searcher))


def welch_difference(a: np.ndarray, b: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    """(mean(a) - mean(b), the half-width of Welch's t interval); nan half-width below 2 values each."""
    a, b = a[np.isfinite(a)], b[np.isfinite(b)]
    if not a.size or not b.size:
        return float("nan"), float("nan")
    diff = float(a.mean() - b.mean())
    if a.size < 2 or b.size < 2:
        return diff, float("nan")
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    if va + vb == 0:
        return diff, 0.0
    df = (va + vb) ** 2 / (va**2 / (a.size - 1) + vb**2 / (b.size - 1))
    return diff, float(stats.t.ppf(0.5 + level / 2, df) * np.sqrt(va + vb))
