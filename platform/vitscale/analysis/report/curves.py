"""Learning curves in report.md: the figures per regime, and beside the verdicts each arm's budget
and convergence mark (a verdict with a still-improving arm carries a note), so no verdict reads as
one between models that had finished learning when one of them had not."""

from __future__ import annotations

import numpy as np

from vitscale.analysis.report.markdown import figure, si, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.budget import CAPPED
from vitscale.analysis.statistics.convergence import (
    LAST_SHARE,
    MIN_POINTS,
    STILL_IMPROVING,
    UNDETERMINED,
    convergence_note,
)
from vitscale.analysis.statistics.learning_curves import IMAGES, ArmCurve
from vitscale.analysis.statistics.verdicts import Comparison
from vitscale.tracking.layout import CURVE_TEST_TOP1, arm_display


def rule_text(res: AnalysisResult) -> str:
    """How an arm is marked, with the threshold this report used."""
    return (
        "*Convergence*: a straight line (least squares) through the arm's mean validation curve over "
        f"the last {LAST_SHARE:.0%} of training, by images seen, gives the top-1 gained across it; "
        f"more than {100 * res.converged_threshold:g} points: **{STILL_IMPROVING}** "
        f"(`--converged-threshold`), else converged; fewer than {MIN_POINTS} evaluated epochs: "
        f"**{UNDETERMINED}**, never converged by default."
    )


def verdict_cell(c: Comparison, res: AnalysisResult) -> str:
    """The verdict with its note: 'better (still improving: ssog · ode)'."""
    note = convergence_note([c.candidate, c.reference], res.convergence)
    return f"{c.verdict} ({note})" if note else c.verdict


def _number(value: float, digits: int = 3) -> str:
    return f"{value:.{digits}g}" if np.isfinite(value) else "—"


def _budget_row(c: ArmCurve) -> list[str]:
    b, m = c.budget, c.convergence
    images = si(b.training_images)
    if b.training_images_from == CAPPED:
        images = f"≤ {images}"
    gain = f"{100 * m.gain:+.2f}" if np.isfinite(m.gain) else "—"
    mark = f"**{m.mark}**" if m.mark == STILL_IMPROVING else m.mark
    if m.mark == UNDETERMINED:
        mark += f" ({m.reason})"
    return [
        arm_display(c.label),
        str(b.runs),
        _number(b.epochs),
        si(b.images_seen),
        images,
        si(b.train_flops) if np.isfinite(b.train_flops) else "— (not logged)",
        str(m.points),
        gain,
        mark,
    ]


def budget_table(res: AnalysisResult) -> list[str]:
    """Per arm: its budget and its convergence mark (what each verdict is between)."""
    if not res.curves:
        return []
    header = [
        "arm",
        "finished runs",
        "epochs",
        "images seen",
        "training images",
        "train FLOPs",
        "evaluated epochs",
        f"val gain, last {LAST_SHARE:.0%} (points)",
        "convergence",
    ]
    undetermined = [arm_display(c.label) for c in res.curves if c.convergence.mark == UNDETERMINED]
    notes = (
        [
            f"Convergence undetermined for {', '.join(undetermined)}: their verdicts may come from "
            "models still learning.",
            "",
        ]
        if undetermined
        else []
    )
    return [
        "### Budget and convergence of each arm",
        "",
        "A verdict is between models at these budgets (means over each arm's finished runs; training "
        "images: images seen per epoch, whole batches; ≤: the `data.num_train` cap of runs that logged "
        "no images seen). " + rule_text(res) + " A verdict with a still-improving arm says so beside "
        "it: it compares budgets as much as models. Curves: *Learning curves*.",
        "",
        *table(header, [_budget_row(c) for c in res.curves]),
        *notes,
    ]


def curves_section(res: AnalysisResult) -> list[str]:
    """The learning-curve figures, what they show and which arms lack a test curve or a history."""
    if not res.curves:
        return []
    runs = "finished final-phase runs" if res.comparison else "finished runs"
    out = [
        "## Learning curves",
        "",
        f"Validation (solid) and test (dashed) top-1 against images seen, per arm the mean over its {runs} "
        "(thin lines: each seed; an epoch is averaged over the seeds that evaluated it), one figure per "
        f"regime; the shaded band is the last {LAST_SHARE:.0%} of training, the window of the "
        "convergence rule. Each arm's mark is in the legend and, with its budget, beside the verdicts.",
        "",
    ]
    if not res.comparisons:  # no verdict section to carry them
        out += budget_table(res)
    drawn = [c for c in res.curves if c.runs]
    if not drawn:
        return out + [
            "No learning curves: no per-epoch history was read (a snapshot written before "
            "curves.parquet existed; redraw from MLflow).",
            "",
        ]
    no_test = [arm_display(c.label) for c in drawn if not c.has_test]
    if no_test:
        which = "No test curve" if len(no_test) == len(drawn) else f"No test curve for {', '.join(no_test)}"
        out += [
            f"{which}: no run logged `{CURVE_TEST_TOP1}` (older runs, or `train.test_curve` off); "
            "validation only.",
            "",
        ]
    epochs = [arm_display(c.label) for c in drawn if c.x_unit != IMAGES]
    if epochs:
        out += [
            f"Against epochs, not images seen (runs that logged no `images_seen`): {', '.join(epochs)}.",
            "",
        ]
    partial = [f"{arm_display(c.label)} ({c.seeds_missing})" for c in res.curves if c.seeds_missing]
    if partial:
        out += [f"Finished runs with no per-epoch history, left out of the curves: {', '.join(partial)}.", ""]
    for p in res.curve_figures:
        out += figure(p, res.out_dir) if p.suffix == ".png" else []
    return out
