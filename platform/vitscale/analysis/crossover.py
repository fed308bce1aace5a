"""Crossover resolutions: where SSoG overtakes attention in throughput or peak memory.

SSoG costs O(N^1.5) against attention's O(N^2), so a fixed overhead can make it slower at small
inputs and faster at large ones. The advantage is measured as a log ratio (positive: SSoG better);
the crossover is the first resolution where it turns from negative to non-negative, found by
linear interpolation in (log resolution, log ratio) between the two measured resolutions around
the sign change. None when SSoG is never ahead (`never`); `ahead_throughout` when it leads everywhere, `falls_behind`
when it leads at the smallest resolution but not at every one.
Only resolutions where both sides were measured count (an out-of-memory point is no ratio).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from vitscale.analysis.fields import as_float
from vitscale.models.registry import BASELINE

METRICS = {"images_per_second": "higher", "peak_memory_mb": "lower"}


@dataclass
class Crossover:
    regime: str
    setting: str
    candidate: str  # series, e.g. "ssog"
    baseline: str  # series, e.g. "attention/sdpa"
    metric: str
    status: str  # crosses | ahead_throughout | falls_behind | never | no_common_resolution
    resolution: float | None  # the interpolated crossover
    below: int | None  # measured resolutions bracketing the sign change
    above: int | None
    ratio_at_largest: float | None  # candidate / baseline at the largest common resolution
    largest: int | None


def crossover_point(
    res: np.ndarray, advantage: np.ndarray
) -> tuple[str, float | None, int | None, int | None]:
    """(status, crossover, below, above) for advantages (log ratios, >0: candidate ahead) on sorted res."""
    if res.size == 0:
        return "no_common_resolution", None, None, None
    if advantage[0] >= 0:
        return "ahead_throughout" if (advantage >= 0).all() else "falls_behind", None, None, None
    for i in range(1, res.size):
        if advantage[i - 1] < 0 <= advantage[i]:
            a0, a1 = advantage[i - 1], advantage[i]
            t = a0 / (a0 - a1)
            log_r = math.log(res[i - 1]) + t * (math.log(res[i]) - math.log(res[i - 1]))
            return "crosses", float(math.exp(log_r)), int(res[i - 1]), int(res[i])
    return "never", None, None, None


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
                vals = as_float(done.column(f"{metric}_mean"))
                for cand in cands:
                    for base in bases:
                        c = _curve(rows, series, res, vals, cand)
                        b = _curve(rows, series, res, vals, base)
                        common = np.array(sorted(set(c) & set(b)))
                        ratio = np.array([c[r] / b[r] for r in common])
                        adv = np.log(ratio) if better == "higher" else -np.log(ratio)
                        status, x, lo, hi = crossover_point(common, adv)
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
                            )
                        )
    return out


def _curve(rows: list[int], series: list, res: np.ndarray, vals: np.ndarray, name: str) -> dict:
    """resolution -> mean value of one series (positive, finite values only)."""
    return {
        float(res[i]): float(vals[i])
        for i in rows
        if series[i] == name and np.isfinite(vals[i]) and vals[i] > 0 and np.isfinite(res[i])
    }


def write_crossovers(items: list[Crossover], path: Path) -> None:
    fields = list(Crossover.__dataclass_fields__)
    rows = [asdict(c) for c in items]
    table = pa.table({f: [r[f] for r in rows] for f in fields}) if rows else pa.table({f: [] for f in fields})
    pacsv.write_csv(table, path)
