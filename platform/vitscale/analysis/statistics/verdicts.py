"""A report's comparisons: each non-reference arm against its reference arm, judged on test
(analysis.statistics.contest) with validation's seed-paired Δ beside it as information only.

Runs pair by `train.seed`; where every paired run logged per-image predictions the two arms pair
image by image too (the images both arms' runs were scored on). Under `--incomplete drop` an arm
that lost more of its runs than the other cannot win a verdict: its survivors are its lucky seeds.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.outcomes import scored
from vitscale.analysis.load.predictions import correctness
from vitscale.analysis.statistics.arms import Arm, reference_of
from vitscale.analysis.statistics.contest import N_RESAMPLES, Judgement, Pair, judge
from vitscale.analysis.statistics.paired import PairedDelta, paired_delta
from vitscale.tracking.layout import arm_display

VERDICT_METRIC, INFO_METRIC = "test_top1", "val_top1"


@dataclass
class Comparison:
    """Candidate − reference: the test judgement, validation's Δ, and the verdict after the
    lost-runs rule."""

    candidate: str
    reference: str
    test: Judgement
    val: PairedDelta | None
    margin: float  # accuracy fraction (0.01 = 1 point)
    verdict: str

    @property
    def shown(self) -> str:
        """'<mixer> · <regime> − <reference mixer> · <regime>': the two arms as people read them."""
        return f"{arm_display(self.candidate)} − {arm_display(self.reference)}"


def compare_arms(
    arms: list[Arm],
    reference: dict,
    table: pa.Table,
    predictions: pa.Table,
    policy: str,
    margin: float,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> list[Comparison]:
    """Every arm with a reference arm, judged on test (Holm across all of them)."""
    pairs = [(arm, ref) for arm in arms if (ref := reference_of(arm, arms, reference)) is not None]
    per_seed_images = images_by_seed(arms, table, predictions, policy)
    contests = [
        Pair(
            arm.per_seed.get(VERDICT_METRIC, {}),
            ref.per_seed.get(VERDICT_METRIC, {}),
            paired_images(per_seed_images[arm.label], per_seed_images[ref.label]),
        )
        for arm, ref in pairs
    ]
    judged = judge(contests, margin, n_resamples=n_resamples, seed=seed)
    out = []
    for (arm, ref), j in zip(pairs, judged, strict=True):
        val = None
        if INFO_METRIC in arm.per_seed:
            val = paired_delta(arm.per_seed[INFO_METRIC], ref.per_seed.get(INFO_METRIC, {}))
        out.append(
            Comparison(arm.label, ref.label, j, val, margin, lost_runs_rule(j.verdict, arm, ref, policy))
        )
    return out


def lost_runs_rule(verdict: str, cand: Arm, ref: Arm, policy: str) -> str:
    """Under `drop`, 'better' / 'worse' from a winner that lost a larger share of its runs, and
    'equivalent' between arms that lost different shares, are not established."""
    if policy != "drop" or not verdict.startswith(("better", "worse", "equivalent")):
        return verdict

    def share(a: Arm) -> float:
        return a.lost / max(a.counts["n_runs"], 1)

    if verdict.startswith("equivalent"):
        if share(cand) == share(ref):
            return verdict
        suspect = cand if share(cand) > share(ref) else ref
    else:
        suspect = cand if verdict == "better" else ref
        if share(suspect) <= share(ref if suspect is cand else cand):
            return verdict
    return (
        f"not established: {arm_display(suspect.label)} lost {suspect.lost}/{suspect.counts['n_runs']} "
        "runs (try --incomplete chance)"
    )


def images_by_seed(
    arms: list[Arm],
    table: pa.Table,
    predictions: pa.Table,
    policy: str,
    metric: str = VERDICT_METRIC,
    split: str = "test",
) -> dict:
    """arm label -> {seed: [(index, correct) of each run that counts for that seed] or None when
    one of them logged no predictions on `split`} (`metric`: the top-1 those predictions give)."""
    by_run = correctness(predictions, split) if predictions.num_rows else {}
    run_ids = table.column("run_id").to_pylist()
    seeds = table.column("seed").to_pylist()
    values = scored(table, metric, policy) if metric in table.column_names else None
    out: dict[str, dict] = {}
    for arm in arms:
        per_seed: dict = {}
        for i in arm.rows if values is not None else ():
            if not np.isfinite(values[i]):
                continue  # not counted in the arm's per-seed values either
            runs = per_seed.setdefault(seeds[i], [])
            if runs is not None:
                per_seed[seeds[i]] = runs + [by_run[run_ids[i]]] if run_ids[i] in by_run else None
        out[arm.label] = per_seed
    return out


def paired_images(cand: dict, ref: dict) -> dict | None:
    """seed -> (candidate, reference) correctness on the images every run of both arms was scored
    on; None when a paired seed lacks predictions or no image is common."""
    seeds = [s for s in cand if s in ref]
    if not seeds or any(cand[s] is None or ref[s] is None for s in seeds):
        return None
    runs = [r for s in seeds for r in (*cand[s], *ref[s])]
    common = runs[0][0]
    for index, _ in runs[1:]:
        common = np.intersect1d(common, index)
    if common.size == 0:
        return None

    def mean_correct(seed_runs: list) -> np.ndarray:
        return np.mean([c[np.isin(i, common)] for i, c in seed_runs], axis=0)

    return {s: (mean_correct(cand[s]), mean_correct(ref[s])) for s in seeds}
