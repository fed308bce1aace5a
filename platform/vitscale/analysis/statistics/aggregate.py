"""Replicate (seed) aggregation: one row per configuration with mean, std, 95 % CI and n per metric.

Only runs that finished their schedule count towards the statistics (status FINISHED and not
stopped early): a stopped-early trial's metrics come from a shorter training and would bias the
mean. Failed, killed and stopped-early trials are counted per configuration so the report shows them,
and so are did-not-train runs (finished at chance level: they stay in the mean).
"""

from __future__ import annotations

import hashlib
import json
import math

import numpy as np
import pyarrow as pa
from scipy import stats

from vitscale.analysis.load.fields import SEED_COLUMNS, as_float, descriptive_fields
from vitscale.models.registry import mixer_order, regime_order

COUNT_COLUMNS = ("n_runs", "n_used", "n_failed", "n_stopped_early", "n_killed", "n_other", "n_did_not_train")


def mean_ci(values: np.ndarray, level: float = 0.95) -> tuple[float, float, float, int]:
    """(mean, sample std, CI half-width from Student's t, n) of the finite values."""
    v = values[np.isfinite(values)]
    n = int(v.size)
    if n == 0:
        return math.nan, math.nan, math.nan, 0
    mean = float(v.mean())
    if n == 1:
        return mean, math.nan, math.nan, 1
    std = float(v.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, n - 1) * std / math.sqrt(n))
    return mean, std, half, n


def group_keys(table: pa.Table, param_columns: list[str], by: list[str] | None = None) -> list[str]:
    """A configuration's key: the `by` columns if given, else CONFIG_KEY, else a hash of its params minus seeds."""
    if by:
        rows = zip(*(table.column(c).to_pylist() for c in by), strict=True)
        return [json.dumps(list(r), default=str) for r in rows]
    config = [c for c in param_columns if c not in SEED_COLUMNS]
    cols = {c: table.column(c).to_pylist() for c in config}
    keys = []
    for i, ck in enumerate(table.column("config_key").to_pylist()):
        if ck:
            keys.append(ck)
        else:
            blob = json.dumps({c: cols[c][i] for c in config}, sort_keys=True, default=str)
            keys.append("h:" + hashlib.sha1(blob.encode()).hexdigest()[:12])
    return keys


def aggregate_replicates(
    table: pa.Table, param_columns: list[str], metrics: list[str], by: list[str] | None = None
) -> pa.Table:
    """One row per configuration of a `with_fields` table, ordered by regime, mixer, width, resolution."""
    keys = group_keys(table, param_columns, by)
    groups: dict[str, list[int]] = {}
    for i, k in enumerate(keys):
        groups.setdefault(k, []).append(i)
    used = np.asarray(table.column("used").to_pylist(), dtype=bool)
    status = table.column("status").to_pylist()
    early = table.column("stopped_early").to_pylist()
    dnt = table.column("did_not_train").to_pylist() if "did_not_train" in table.column_names else []
    run_ids = table.column("run_id").to_pylist()
    values = {m: as_float(table.column(m)) for m in metrics}

    order = _ordered(table, groups)
    first = [next((i for i in groups[k] if used[i]), groups[k][0]) for k in order]
    descriptive = [c for c in (*descriptive_fields(), "series") if c in table.column_names]
    descriptive += [c for c in param_columns if c not in SEED_COLUMNS and c not in descriptive]
    if "tokens" not in metrics and "tokens" in table.column_names:
        descriptive.append("tokens")
    out: dict[str, pa.Array | list] = {"group_key": pa.array(order, pa.string())}
    picked = table.select(descriptive).take(pa.array(first, pa.int64()))
    for c in descriptive:
        out[c] = picked.column(c)
    counts: dict[str, list[int]] = {c: [] for c in COUNT_COLUMNS}
    ids: list[str] = []
    reasons: list[str] = []
    failure = table.column("failure_reason").to_pylist()
    stat_cols: dict[str, list[float]] = {
        f"{m}_{s}": [] for m in metrics for s in ("mean", "std", "ci95", "n")
    }
    for k in order:
        idx = groups[k]
        use = [i for i in idx if used[i]]
        counts["n_runs"].append(len(idx))
        counts["n_used"].append(len(use))
        counts["n_failed"].append(sum(status[i] == "FAILED" for i in idx))
        counts["n_stopped_early"].append(sum(bool(early[i]) for i in idx))
        counts["n_killed"].append(sum(status[i] == "KILLED" for i in idx))
        counts["n_other"].append(sum(status[i] not in ("FINISHED", "FAILED", "KILLED") for i in idx))
        counts["n_did_not_train"].append(sum(dnt[i] is True for i in idx) if dnt else 0)
        ids.append(";".join(sorted(run_ids[i] for i in use)))
        reasons.append(
            ";".join(sorted({str(failure[i]) for i in idx if status[i] == "FAILED" and failure[i]}))
        )
        for m in metrics:
            mean, std, half, n = mean_ci(values[m][use])
            for s, v in (("mean", mean), ("std", std), ("ci95", half), ("n", n)):
                stat_cols[f"{m}_{s}"].append(v)
    for c in COUNT_COLUMNS:
        out[c] = pa.array(counts[c], pa.int64())
    out["run_ids"] = pa.array(ids, pa.string())
    out["failure_reasons"] = pa.array(reasons, pa.string())
    for name, vals in stat_cols.items():
        out[name] = pa.array(vals, pa.int64() if name.endswith("_n") else pa.float64())
    return pa.table(out)


def _ordered(table: pa.Table, groups: dict[str, list[int]]) -> list[str]:
    """Groups sorted by regime, mixer (baseline first), width, resolution, series, key."""
    cols = {
        c: table.column(c).to_pylist() if c in table.column_names else [None] * table.num_rows
        for c in ("mixer", "regime", "width", "resolution", "series")
    }
    mixers = mixer_order([m for m in cols["mixer"] if m is not None])
    regimes = regime_order([r for r in cols["regime"] if r is not None])

    def rank(key: str) -> tuple:
        i = groups[key][0]
        m, r = cols["mixer"][i], cols["regime"][i]
        num = [cols[c][i] if isinstance(cols[c][i], int | float) else -1 for c in ("width", "resolution")]
        return (
            regimes.index(r) if r in regimes else -1,
            mixers.index(m) if m in mixers else -1,
            *num,
            str(cols["series"][i]),
            key,
        )

    return sorted(groups, key=rank)
