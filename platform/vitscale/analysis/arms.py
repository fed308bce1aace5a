"""Arms and their seed-paired Δ top-1 against the reference arm, on validation and on test.

Comparison studies (`kind: comparison`): an arm is the `vitscale.arm` tag; its numbers come from
its final-phase runs (the tuned configuration re-run over seeds), its reference arm matches the
parent run's `vitscale.reference` on those keys and equals the arm on the others. Other training
studies: an arm is mixer × regime × width, its configuration the one with the best validation mean
(never test), and the reference the attention arm of the same regime and width.
Every arm and Δ carries its outcome counts; `policy` says how runs without a final number count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vitscale.analysis.aggregate import group_keys, mean_ci
from vitscale.analysis.outcomes import outcome_counts, scored
from vitscale.analysis.paired import PairedDelta, by_seed, paired_delta
from vitscale.models.registry import BASELINE, regime_order
from vitscale.tracking.layout import arm_display, parse_arm

METRICS = ("val_top1", "test_top1")  # test is reported beside validation, never used to choose
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
    tuning: dict | None = None  # comparison studies: budget and edge flags (analysis.tuning)

    @property
    def lost(self) -> int:
        return self.counts["n_runs"] - self.counts["n_used"]


@dataclass
class ArmDelta:
    """Candidate − reference on one metric, seed-paired, with a verdict that respects lost runs."""

    candidate: str
    reference: str
    metric: str
    delta: PairedDelta
    verdict: str

    @property
    def shown(self) -> str:
        """'ssog · ode − attention · ode': the two arms as people read them."""
        return f"{arm_display(self.candidate)} − {arm_display(self.reference)}"


def is_comparison(kind: str, table: pa.Table) -> bool:
    return kind == "comparison" or "final" in set(table.column("phase").to_pylist())


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


MIN_VERDICT_SEEDS = 3  # with 2, one seed's luck decides and the t-interval is 12.7 standard errors wide


def verdict(d: PairedDelta, cand: Arm, ref: Arm, policy: str) -> str:
    """'better' / 'worse' only from MIN_VERDICT_SEEDS paired seeds whose differences spread (a
    zero-width interval from identical differences, common with accuracies on a small split, is
    no evidence), when the interval excludes 0 and, when runs were dropped, the arm that looks
    better did not lose more of its runs than the other."""
    if d.n < MIN_VERDICT_SEEDS or not np.isfinite(d.ci95):
        return f"undecided (n={d.n}; a verdict needs {MIN_VERDICT_SEEDS} paired seeds)"
    if d.mean - d.ci95 <= 0 <= d.mean + d.ci95:
        return "no clear difference"
    if d.ci95 == 0:
        return f"undecided (n={d.n}: every seed gives the same Δ, so the interval says nothing)"
    better = d.mean > 0
    winner, loser = (cand, ref) if better else (ref, cand)
    lost_w, lost_l = (
        winner.lost / max(winner.counts["n_runs"], 1),
        loser.lost / max(loser.counts["n_runs"], 1),
    )
    if policy == "drop" and lost_w > lost_l:
        return f"not established: {winner.label} lost {winner.lost}/{winner.counts['n_runs']} runs (try --incomplete chance)"
    return "better" if better else "worse"


def arm_deltas(arms: list[Arm], reference: dict, policy: str) -> list[ArmDelta]:
    """Seed-paired Δ of every non-reference arm against its reference arm, per metric."""
    out = []
    for arm in arms:
        ref = reference_of(arm, arms, reference)
        if ref is None:
            continue
        for m in arm.per_seed:
            d = paired_delta(arm.per_seed[m], ref.per_seed.get(m, {}))
            out.append(ArmDelta(arm.label, ref.label, m, d, verdict(d, arm, ref, policy)))
    return out


def study_arms(
    kind: str, table: pa.Table, params: list[str], context: dict, policy: str
) -> tuple[list[Arm], dict]:
    """(arms with statistics, the reference mapping used) for a `with_outcomes` training table."""
    if is_comparison(kind, table):
        arms = comparison_arms(table)
        reference = (context or {}).get("reference") or DEFAULT_REFERENCE
    else:
        arms = best_config_arms(table, params, policy)
        reference = DEFAULT_REFERENCE
    fill_arms(table, arms, params, policy)
    return arms, reference
