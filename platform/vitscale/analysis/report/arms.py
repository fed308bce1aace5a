"""Arm sections of report.md and their CSVs: each arm's top-1 (validation and test) with its
outcome counts, each comparison against the reference arm (Δ test with the seed-paired t-interval
and the seeds × images bootstrap, Δ val as information, p, margin, verdict), and for comparison
studies the tuning budget, tuned configuration and edge-of-range flags (each naming the key, the
value and the edge: `vitscale.range_edge`)."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv

from vitscale.analysis.report.curves import budget_table, verdict_cell
from vitscale.analysis.report.markdown import outcomes, pm, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.arms import METRICS
from vitscale.analysis.statistics.contest import ALPHA, ImageBootstrap, Judgement
from vitscale.analysis.statistics.convergence import UNDETERMINED, convergence_note
from vitscale.analysis.statistics.paired import MIN_VERDICT_SEEDS
from vitscale.analysis.statistics.verdicts import Comparison
from vitscale.range_edge import number
from vitscale.tracking.layout import arm_display

POLICY_TEXT = {
    "drop": "Runs that failed, were stopped early or were killed are **dropped** from these means and Δ "
    "(`--incomplete chance` scores them as chance, 1 / classes, instead).",
    "chance": "Runs that failed, were stopped early or were killed are **scored as chance** "
    "(1 / classes) in these means and Δ (`--incomplete drop` leaves them out instead).",
}


def write_arms(res: AnalysisResult) -> None:
    """arms.csv (one row per arm) and deltas.csv (one row per comparison) in the output folder."""
    if not res.arms:
        return
    arm_rows = []
    for arm in res.arms:
        row = {"arm": arm.label, "policy": res.policy, **arm.counts}
        for m in METRICS:
            mean, half, n = arm.stats.get(m, (float("nan"), float("nan"), 0))
            row.update({f"{m}_mean": mean, f"{m}_ci95": half, f"{m}_n": n})
        row.update(_curve_columns(res, arm.label))
        row["config"] = json.dumps(arm.config, sort_keys=True, default=str)
        if arm.tuning is not None:
            row.update({f"tune_{k}": v for k, v in arm.tuning["budget"].items()})
            row["tuned"] = json.dumps(arm.tuning["tuned"], sort_keys=True, default=str)
            row["at_edge"] = json.dumps({k: e.side for k, e in arm.tuning["edges"].items()}, sort_keys=True)
        arm_rows.append(row)
    pacsv.write_csv(pa.Table.from_pylist(arm_rows), res.out_dir / "arms.csv")
    if res.comparisons:
        rows = [_delta_row(c, res) for c in res.comparisons]
        pacsv.write_csv(pa.Table.from_pylist(rows), res.out_dir / "deltas.csv")


def _curve_columns(res: AnalysisResult, label: str) -> dict:
    """arms.csv's budget and convergence columns of one arm (none before learning_curves ran)."""
    curve = next((c for c in res.curves if c.label == label), None)
    if curve is None:
        return {}
    b, m = curve.budget, curve.convergence
    return {
        "epochs": b.epochs,
        "images_seen": b.images_seen,
        "training_images": b.training_images,
        "training_images_from": b.training_images_from,
        "train_flops": b.train_flops,
        "evaluated_epochs": m.points,
        "val_gain_last_quarter": m.gain,
        "convergence": m.mark,
        "convergence_reason": m.reason,
        "converged_threshold_points": 100 * res.converged_threshold,
    }


def _delta_row(c: Comparison, res: AnalysisResult) -> dict:
    """One comparison of deltas.csv: Δ test (t and bootstrap), Δ val, p, margin, verdict, outcomes."""
    j, boot, val = c.test, c.test.boot, c.val
    by_label = {a.label: a for a in res.arms}
    row = {
        "arm": c.candidate,
        "reference": c.reference,
        "test_delta_mean": j.t.mean,
        "test_delta_ci95": j.t.ci95,
        "n_seeds": j.t.n,
        "seeds": json.dumps(j.t.seeds, default=str),
        "boot_delta_mean": boot.mean if boot else None,
        "boot_low": boot.low if boot else None,
        "boot_high": boot.high if boot else None,
        "boot_over": boot.over if boot else None,
        "n_test_images": boot.n_images if boot else None,
        "mcnemar_p": j.mcnemar_p,
        "val_delta_mean": val.mean if val else None,
        "val_delta_ci95": val.ci95 if val else None,
        "val_n_seeds": val.n if val else None,
        "p_from": j.route or None,
        "claim": j.claim or None,
        "p": j.p,
        "p_holm": j.p_holm,
        "holm_k": j.family,
        "margin_points": 100 * c.margin,
        "verdict": c.verdict,
        "policy": res.policy,
    }
    marks = res.convergence
    if marks:
        pair = [c.candidate, c.reference]
        row["arm_convergence"] = marks[c.candidate].mark if c.candidate in marks else None
        row["reference_convergence"] = marks[c.reference].mark if c.reference in marks else None
        notes = (convergence_note(pair, marks), convergence_note(pair, marks, UNDETERMINED))
        row["convergence_note"] = "; ".join(n for n in notes if n) or None
    for side, label in (("arm", c.candidate), ("reference", c.reference)):
        row.update({f"{side}_{k}": v for k, v in by_label[label].counts.items()})
    return row


def delta_section(res: AnalysisResult) -> list[str]:
    """Each arm against its reference: the verdict on test with its intervals, validation beside it."""
    if not res.comparisons:
        return []
    by_label = {a.label: a for a in res.arms}
    rows = [
        [
            arm_display(c.candidate),
            arm_display(c.reference),
            pm(c.test.t.mean, c.test.t.ci95, c.test.t.n, 100, signed=True),
            boot_cell(c.test.boot),
            pm(c.val.mean, c.val.ci95, c.val.n, 100, signed=True) if c.val else "—",
            str(c.test.t.n),
            str(c.test.boot.n_images) if c.test.boot else "—",
            p_cell(c.test),
            f"±{100 * c.margin:g}",
            verdict_cell(c, res),
            outcomes(by_label[c.candidate].counts),
            outcomes(by_label[c.reference].counts),
        ]
        for c in res.comparisons
    ]
    header = [
        "arm",
        "reference",
        "Δ test (t, seeds)",
        "Δ test (bootstrap, seeds × images)",
        "Δ val (information)",
        "seeds",
        "test images",
        "p (Holm)",
        "margin",
        "verdict (test)",
        "arm runs",
        "reference runs",
    ]
    lacking = [c.shown for c in res.comparisons if c.test.boot is None and c.test.t.n]
    note = (
        [
            "No per-image predictions (older runs) for " + "; ".join(lacking) + ": their verdicts use "
            "the seed-paired t-interval only.",
            "",
        ]
        if lacking
        else []
    )
    return [
        "## Δ top-1 against the reference: verdicts on test",
        "",
        _method(res),
        "",
        *note,
        *table(header, rows),
        *budget_table(res),
    ]


def _method(res: AnalysisResult) -> str:
    """The paragraph that says how the Δ table's intervals, p-values and verdicts are made."""
    ref_text = ", ".join(f"{k}={v}" for k, v in res.reference.items())
    k = max((c.test.family for c in res.comparisons), default=0)
    return (
        f"Δ = arm − reference ({ref_text}) in points. The verdict reads **test**, which no choice "
        "read; Δ val is information only (validation chose every configuration). *t*: the mean of "
        "per-seed differences (paired by `train.seed`) ± its 95 % Student-t interval (none below "
        f"{MIN_VERDICT_SEEDS} seeds). *bootstrap*: the 95 % percentile interval of a paired "
        f"hierarchical bootstrap ({res.n_resamples} resamples, seed {res.seed}): each replicate "
        "resamples the seeds with replacement and the test images with replacement, one image draw "
        "shared by both arms and every seed (all runs scored the same images), and takes the mean "
        "over its seeds of acc(arm) − acc(reference). Each comparison is tested for a difference "
        "(two-sided) and for equivalence within ±margin (TOST: both one-sided tests at "
        f"α = {ALPHA}, i.e. the 90 % interval inside ±margin); where every paired run logged "
        "per-image predictions a test must pass both the bootstrap and the seed-paired t test (its p "
        "is the larger: a percentile bootstrap over a few seeds is narrower than the t-interval, "
        "which leaves out image noise), else the t test alone. Its claim is "
        f"equivalence when the TOST p is ≤ {ALPHA} or below the two-sided p (a Δ inside the "
        "margin is none that matters), else a difference; the claims are Holm-adjusted across the "
        f"k = {k} comparisons of this report that can be decided: better / worse / equivalent "
        "within ±margin when the adjusted "
        f"p ≤ {ALPHA}, else undecided. Below {MIN_VERDICT_SEEDS} paired seeds there is no verdict, "
        "as seed-to-seed variation is not measured (the image bootstrap is shown with the seeds "
        "held fixed, and one seed shows McNemar's exact test). Under `--incomplete drop` a verdict "
        "for the arm that lost the larger share of its runs, or an equivalence between arms that "
        "lost different shares, is *not established*. " + POLICY_TEXT[res.policy]
    )


def p_cell(j: Judgement) -> str:
    if j.claim:
        return f"{j.p_holm:.2g} ({j.claim}, {j.route})"
    if np.isfinite(j.mcnemar_p):
        return f"McNemar {j.mcnemar_p:.2g} (1 seed, not adjusted)"
    return "—"


def boot_cell(boot: ImageBootstrap | None) -> str:
    if boot is None:
        return "— (no per-image predictions)"
    text = f"{100 * boot.mean:+.2f} [{100 * boot.low:+.2f}, {100 * boot.high:+.2f}]"
    return text + (" (images only)" if boot.over == "images" else "")


def arms_section(res: AnalysisResult) -> list[str]:
    """Per arm: validation and test top-1 with counts; comparison studies add the tuning record."""
    if not res.arms:
        return []
    tuned = res.comparison
    header = ["arm", "val top-1 (%)", "test top-1 (%)", "runs"]
    chosen = [] if tuned else res.settings  # which of the arm's configurations is shown
    header += ["configuration"] if chosen else []
    if tuned:
        header += ["tuning budget (tune-phase runs)", "tuned configuration", "at the edge of its range"]
    rows = []
    for arm in res.arms:
        stats = [pm(*arm.stats[m], 100) if m in arm.stats else "—" for m in METRICS]
        row = [arm_display(arm.label), *stats, outcomes(arm.counts)]
        row += [", ".join(f"{k}={arm.config.get(k)}" for k in chosen)] if chosen else []
        if tuned:
            t = arm.tuning or {"budget": {}, "tuned": {}, "edges": {}}
            row += [
                outcomes(t["budget"]) if t["budget"].get("n_runs") else "0",
                ", ".join(f"{k}={number(v)}" for k, v in t["tuned"].items()) or "— (search space unknown)",
                ", ".join(f"⚠ {e.describe(k, t['tuned'][k])}" for k, e in t["edges"].items()) or "none",
            ]
        rows.append(row)
    intro = (
        "Each arm's numbers come from its final-phase runs (the tuned configuration over seeds)."
        if tuned
        else "Each arm (mixer · regime · width) shows its configuration with the best validation mean."
    )
    notes = []
    if tuned and any(a.tuning and a.tuning["edges"] for a in res.arms):
        notes = [
            "⚠: the tuned value lies at the edge of the searched range (within 5 % of its width, on "
            "the log scale for log ranges; of listed numbers, the smallest or largest): the optimum "
            "may lie outside it, so that arm may be under-tuned.",
            "",
        ]
    return ["## Arms", "", intro + " " + POLICY_TEXT[res.policy], "", *table(header, rows), *notes]
