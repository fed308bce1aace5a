"""Arms: which runs make each arm, its reference arm, and its per-seed top-1 with mean ± CI.

Comparison studies (`kind: comparison`): an arm is the `vitscale.arm` tag; its numbers come from
its final-phase runs (the tuned configuration re-run over seeds), its reference arm matches the
parent run's `vitscale.reference` on those keys and equals the arm on the others. Other training
studies: an arm is mixer × regime × width, its configuration the one with the best validation mean
(never test), and the reference the attention arm of the same regime and width.
Every arm carries its outcome counts; `policy` says how runs without a final number count. Their
comparisons (Δ and verdicts on test): analysis.statistics.verdicts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.outcomes import outcome_counts, scored
from vitscale.analysis.statistics.aggregate import group_keys, mean_ci
from vitscale.analysis.statistics.paired import by_seed
from vitscale.models.registry import BASELINE, regime_order
from vitscale.tracking.layout import parse_arm

METRICS = ("val_top1", "test_top1")  # validation chose the configurations; verdicts read test
DEFAULT_REFERENCE = {"model.mixer": BASELINE}


@dataclass
class Arm:
    """One arm: its key (dotted param -> value, as strings), the runs counted, their statistics."""

    label: str
    key: dict[str, str]
    rows: list[int]
    counts: dict[str, int] = field(default_factory=dict)
    stats: dict[str, tuple[float, float, int]] = field(default_factory=dict)  # metric -> mean, ci95, n
    per_seed: dict[str, dict] = field(default_factory=dict)  # metric -> {seed: scored value}
    config: dict = field(default_factory=dict)  # the arm's (tuned or chosen) configuration
    tuning: dict | None = None  # comparison studies: budget and edge flags (analysis.statistics.tuning)

    @property
    def lost(self) -> int:
        return self.counts["n_runs"] - self.counts["n_used"]


def comparison_arms(table: pa.Table) -> list[Arm]:
    """One arm per `arm` tag over its final-phase runs, in first-seen order."""
    phase, arm = table.column("phase").to_pylist(), table.column("arm").to_pylist()
    rows: dict[str, list[int]] = {}
    for i, (p, a) in enumerate(zip(phase, arm, strict=True)):
        if p == "final" and a:
            rows.setdefault(a, []).append(i)
    return [Arm(label=a, key=parse_arm(a), rows=r) for a, r in rows.items()]


def best_config_arms(table: pa.Table, params: list[str], policy: str) -> list[Arm]:
    """Per regime × width × mixer, the configuration with the best validation mean (scored by `policy`)."""
    keys = group_keys(table, params)
    cols = {c: table.column(c).to_pylist() for c in ("mixer", "regime", "width")}
    val = scored(table, "val_top1", policy)
    configs: dict[tuple, dict[str, list[int]]] = {}
    for i, k in enumerate(keys):
        cell = (cols["regime"][i], cols["width"][i], cols["mixer"][i])
        if None not in cell[::2]:
            configs.setdefault(cell, {}).setdefault(k, []).append(i)
    arms = []
    regimes = regime_order([c[0] for c in configs])
    for cell in sorted(configs, key=lambda c: (regimes.index(c[0]), _num(c[1]), c[2] != BASELINE, c[2])):
        best = max(configs[cell].values(), key=lambda r: (_score(val[r]), len(r)))
        regime, width, mixer = cell
        key = {"model.mixer": str(mixer), "model.regime": str(regime), "model.width": str(width)}
        arms.append(Arm(label=f"{mixer} · {regime} · {width}", key=key, rows=best))
    return arms


def _score(values: np.ndarray) -> float:
    finite = values[np.isfinite(values)]
    return float(finite.mean()) if finite.size else -math.inf


def _num(value) -> float:
    return float(value) if isinstance(value, int | float) else math.inf


def fill_arms(table: pa.Table, arms: list[Arm], params: list[str], policy: str) -> None:
    """Counts, per-seed scored values, mean ± CI and the configuration of each arm (in place)."""
    seeds = table.column("seed").to_pylist()
    values = {m: scored(table, m, policy) for m in METRICS if m in table.column_names}
    skip = {"train.seed", "bench.seed", "seed"}
    for arm in arms:
        arm.counts = outcome_counts(table, arm.rows)
        for m, v in values.items():
            per_seed = by_seed([seeds[i] for i in arm.rows], v[arm.rows])
            mean, _, half, n = mean_ci(np.array(list(per_seed.values()), dtype=float))
            arm.per_seed[m], arm.stats[m] = per_seed, (mean, half, n)
        first = table.slice(arm.rows[0], 1).to_pylist()[0] if arm.rows else {}
        arm.config = {p: first.get(p) for p in params if p not in skip}


def reference_of(arm: Arm, arms: list[Arm], reference: dict) -> Arm | None:
    """The arm equal to `reference` on its keys and to `arm` on the others (None for a reference arm)."""
    ref = {k: str(v) for k, v in reference.items()}
    if all(arm.key.get(k) == v for k, v in ref.items()):
        return None
    want = {**arm.key, **ref}
    return next((a for a in arms if a.key == want), None)


def study_arms(
    from_final: bool, table: pa.Table, params: list[str], context: dict, policy: str
) -> tuple[list[Arm], dict]:
    """(arms with statistics, the reference mapping used) for a `with_outcomes` training table;
    `from_final`: its arms are its final runs' (`AnalysisKind.arms_from_final`)."""
    if from_final:
        arms = comparison_arms(table)
        reference = (context or {}).get("reference") or DEFAULT_REFERENCE
    else:
        arms = best_config_arms(table, params, policy)
        reference = DEFAULT_REFERENCE
    fill_arms(table, arms, params, policy)
    return arms, reference
