"""Crossover resolutions: where SSoG overtakes attention in throughput or peak memory, with a margin.

SSoG costs O(N^1.5) against attention's O(N^2), so a fixed overhead can make it slower at small
inputs and faster at large ones. At each resolution both sides measured, the candidate is ahead,
behind or tied: ahead or behind only where the ratio candidate / baseline differs from 1 by more
than its margin (`bench.margin`: both sides' spreads added — the timed repeats' interquartile range
over their median, or over seeds the 95 % interval, whichever is larger — and at least 1 %); a
side without any spread (one repeat, one seed), or whose CPU timing was contended (its CPU time far
from wall × threads, `bench.contention`: its wall time includes waiting for a core), leaves that
resolution's throughput undecided. 0.9999× is a tie. A throughput ratio comes from the candidate's
own trials where they timed the baseline beside them (bench.paired, the default on CPU: two trials
timed minutes apart differ by the machine's drift), else from the two series' means.

Status over the resolutions, from those verdicts: `crosses` (behind, then ahead: the crossover is
interpolated in (log resolution, log ratio) at the sign change between the last resolution behind
and the first ahead), `falls_behind` (ahead, then behind), `ahead_throughout`,
`behind_throughout`, `tied_throughout`, `ahead_or_tied` / `behind_or_tied` (one way where
decided, tied elsewhere), `mixed` (back and forth), `undecided` (some resolution has no margin),
`no_common_resolution`. Only resolutions where both sides were measured count (an out-of-memory
point is no ratio).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from vitscale.analysis.load.fields import as_float
from vitscale.bench.contention import is_contended
from vitscale.bench.margin import MIN_MARGIN, ratio_margin, side_spread, verdict
from vitscale.models.registry import BASELINE

METRICS = {"images_per_second": "higher", "peak_memory_mb": "lower"}
# The repeats' spread of each metric, where its runs log one (memory is measured once per run).
REPEAT_SPREADS = {"images_per_second": "latency_spread_mean"}
SIGNS = {"ahead": 1, "behind": -1, "tied": 0, "undecided": None}


@dataclass
class Crossover:
    regime: str
    setting: str
    candidate: str  # a series label (analysis.load.fields.series_labels): a mixer not the baseline
    baseline: str  # a series label of the baseline mixer, its backend included (`<mixer>/<backend>`)
    metric: str
    status: str  # see the module docstring
    resolution: float | None  # the interpolated crossover
    below: int | None  # measured resolutions bracketing the sign change
    above: int | None
    ratio_at_largest: float | None  # candidate / baseline at the largest common resolution
    largest: int | None
    margin_at_largest: float | None = None  # the relative margin that ratio had to beat
    verdicts: str = ""  # "32 behind · 64 tied": the verdict at every common resolution


def crossover_point(
    res: np.ndarray, advantage: np.ndarray, margin: np.ndarray | None = None
) -> tuple[str, float | None, int | None, int | None]:
    """(status, crossover, below, above) for advantages (log ratios, >0: candidate ahead) on sorted
    res, each beside its relative margin (NaN: none, so undecided; default: no margin at all)."""
    if res.size == 0:
        return "no_common_resolution", None, None, None
    margin = np.zeros(res.size) if margin is None else np.asarray(margin, dtype=float)
    signs = [_sign(a, m) for a, m in zip(advantage, margin, strict=True)]
    if any(s is None for s in signs):
        return "undecided", None, None, None
    decided = [(i, s) for i, s in enumerate(signs) if s != 0]
    changes = sum(a[1] != b[1] for a, b in zip(decided, decided[1:], strict=False))
    if not decided:
        return "tied_throughout", None, None, None
    if changes == 0:
        way = "ahead" if decided[0][1] > 0 else "behind"
        return (f"{way}_throughout" if len(decided) == res.size else f"{way}_or_tied"), None, None, None
    if changes > 1:
        return "mixed", None, None, None
    if decided[0][1] > 0:
        return "falls_behind", None, None, None
    lo = max(i for i, s in decided if s < 0)
    hi = min(i for i, s in decided if s > 0)
    j = next(k for k in range(lo + 1, hi + 1) if advantage[k - 1] < 0 <= advantage[k])
    a0, a1 = advantage[j - 1], advantage[j]
    t = a0 / (a0 - a1)
    log_r = math.log(res[j - 1]) + t * (math.log(res[j]) - math.log(res[j - 1]))
    return "crosses", float(math.exp(log_r)), int(res[lo]), int(res[hi])


def _sign(advantage: float, margin: float) -> int | None:
    if not math.isfinite(margin):
        return None
    return SIGNS[verdict(math.exp(advantage), margin)]


def crossovers(agg: pa.Table) -> list[Crossover]:
    """Every candidate series against every baseline series, per regime and setting, per metric."""
    done = agg.filter(pc.greater(agg.column("n_used"), 0))
    labels = done.column("setting").to_pylist()
    regimes, series = done.column("regime").to_pylist(), done.column("series").to_pylist()
    mixers, res = done.column("mixer").to_pylist(), as_float(done.column("resolution"))
    out = []
    for regime in dict.fromkeys(regimes):
        for setting in dict.fromkeys(labels):
            rows = [i for i in range(done.num_rows) if regimes[i] == regime and labels[i] == setting]
            bases = sorted({series[i] for i in rows if mixers[i] == BASELINE})
            cands = sorted({series[i] for i in rows if mixers[i] != BASELINE})
            for metric, better in METRICS.items():
                if f"{metric}_mean" not in done.column_names:
                    continue
                vals, spreads = as_float(done.column(f"{metric}_mean")), _spreads(done, metric)
                for cand in cands:
                    for base in bases:
                        c = _curve(rows, series, res, vals, spreads, cand)
                        b = _curve(rows, series, res, vals, spreads, base)
                        common = np.array(sorted(set(c) & set(b)))
                        ratio = np.array([c[r][0] / b[r][0] for r in common])
                        margins = [ratio_margin(c[r][1], b[r][1]) for r in common]
                        if metric == "images_per_second":  # timed side by side where it was paired
                            paired = _paired_curve(done, rows, series, res, spreads, cand, base)
                            for k, r in enumerate(common):
                                if r in paired:
                                    ratio[k], margins[k] = paired[r]
                        margin = np.array([math.nan if m is None else m for m in margins])
                        adv = np.log(ratio) if better == "higher" else -np.log(ratio)
                        status, x, lo, hi = crossover_point(common, adv, margin)
                        words = [
                            f"{r:.0f} {verdict(q, m, better == 'higher')}"
                            for r, q, m in zip(common, ratio, margins, strict=True)
                        ]
                        out.append(
                            Crossover(
                                regime,
                                setting,
                                cand,
                                base,
                                metric,
                                status,
                                x,
                                lo,
                                hi,
                                float(ratio[-1]) if ratio.size else None,
                                int(common[-1]) if common.size else None,
                                margins[-1] if margins else None,
                                " · ".join(words),
                            )
                        )
    return out


def _spreads(done: pa.Table, metric: str) -> list[float | None]:
    """Each row's relative spread of `metric`: the larger of its repeats' spread (throughput) and
    its seeds' 95 % interval over the mean; memory without seeds: 0 (measured once, exactly). A
    contended timing has none: its throughput cannot carry a claim."""
    mean = as_float(done.column(f"{metric}_mean"))
    ci_col = f"{metric}_ci95"
    ci = as_float(done.column(ci_col)) if ci_col in done.column_names else np.full(mean.size, np.nan)
    repeat_col = REPEAT_SPREADS.get(metric)
    repeats = (
        as_float(done.column(repeat_col))
        if repeat_col and repeat_col in done.column_names
        else np.full(mean.size, np.nan)
    )
    contended = (
        [is_contended(v) if np.isfinite(v) else False for v in as_float(done.column("cpu_wall_ratio_mean"))]
        if repeat_col and "cpu_wall_ratio_mean" in done.column_names
        else [False] * mean.size
    )
    out = []
    for m, c, r, busy in zip(mean, ci, repeats, contended, strict=True):
        found = None if busy else side_spread([r, c / m if m > 0 else math.nan])
        out.append(found if found is not None or repeat_col else 0.0)
    return out


def _paired_curve(
    done: pa.Table, rows: list[int], series: list, res: np.ndarray, spreads: list, cand: str, base: str
) -> dict[float, tuple[float, float | None]]:
    """resolution -> (ratio, margin) of `cand` to `base` as timed side by side in the candidate's
    own trials (bench.paired: `paired_ratio_<backend>`, mean over seeds), where they were. Its
    margin: the repeats' spreads of both sides in that trial, or the seeds' 95 % interval of the
    ratio if larger; none for a contended candidate timing (undecided, as unpaired)."""
    backend = base.split("/", 1)[1] if "/" in base else ""
    column = f"paired_ratio_{backend}_mean"
    if not backend or column not in done.column_names:
        return {}
    ratios = as_float(done.column(column))
    margins = _optional(done, f"paired_margin_{backend}_mean")
    ci = _optional(done, f"paired_ratio_{backend}_ci95")
    out = {}
    for i in rows:
        if series[i] != cand or not (np.isfinite(ratios[i]) and ratios[i] > 0 and np.isfinite(res[i])):
            continue
        spread = side_spread([margins[i], ci[i] / ratios[i]]) if spreads[i] is not None else None
        out[float(res[i])] = (float(ratios[i]), None if spread is None else max(MIN_MARGIN, spread))
    return out


def _optional(done: pa.Table, column: str) -> np.ndarray:
    return as_float(done.column(column)) if column in done.column_names else np.full(done.num_rows, np.nan)


def _curve(
    rows: list[int], series: list, res: np.ndarray, vals: np.ndarray, spreads: list, name: str
) -> dict:
    """resolution -> (mean value, relative spread) of one series (positive, finite values only)."""
    return {
        float(res[i]): (float(vals[i]), spreads[i])
        for i in rows
        if series[i] == name and np.isfinite(vals[i]) and vals[i] > 0 and np.isfinite(res[i])
    }


def write_crossovers(items: list[Crossover], path: Path) -> None:
    fields = list(Crossover.__dataclass_fields__)
    rows = [asdict(c) for c in items]
    table = pa.table({f: [r[f] for r in rows] for f in fields}) if rows else pa.table({f: [] for f in fields})
    pacsv.write_csv(table, path)
