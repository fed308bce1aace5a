"""The accuracy-at-resolution section of report.md and its CSV (analysis.statistics.resolution)."""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.csv as pacsv

from vitscale.analysis.report.arms import boot_cell, p_cell
from vitscale.analysis.report.markdown import pm, si, table
from vitscale.analysis.result import AnalysisResult
from vitscale.tracking.layout import arm_display

CSV = "resolution.csv"


def write_resolution_csv(res: AnalysisResult) -> None:
    """resolution.csv: one row per (arm, evaluation resolution)."""
    if not res.resolution_points:
        return
    rows = []
    for p in res.resolution_points:
        j = p.judgement
        rows.append(
            {
                "arm": p.arm,
                "trained": p.trained,
                "resolution": p.resolution,
                "tokens": p.tokens,
                "test_top1_mean": p.test[0],
                "test_top1_ci95": p.test[1],
                "test_top1_n": p.test[2],
                "val_top1_mean": p.val[0],
                "val_top1_ci95": p.val[1],
                "reference": p.reference,
                "test_delta_mean": j.t.mean if j else None,
                "test_delta_ci95": j.t.ci95 if j else None,
                "test_delta_boot_low": j.boot.low if j and j.boot else None,
                "test_delta_boot_high": j.boot.high if j and j.boot else None,
                "p_holm": j.p_holm if j else None,
                "verdict": p.verdict or None,
                "images_per_second": p.throughput,
                "on_front": p.on_front,
            }
        )
    pacsv.write_csv(pa.Table.from_pylist(rows), res.out_dir / CSV)


def resolution_section(res: AnalysisResult) -> list[str]:
    """Per arm and evaluated side: test top-1, Δ against the reference at that side, throughput."""
    points = res.resolution_points
    if not points:
        return []
    has_thr = any(p.throughput is not None for p in points)
    header = ["arm", "trained (px)", "eval px (tokens)", "test top-1 (%)", "val top-1 (%)"]
    header += ["Δ test (t, seeds)", "Δ test (bootstrap, seeds × images)", "p (Holm)", "verdict (test)"]
    header += ["images/s (inference)", "front"] if has_thr else []
    rows = []
    for p in sorted(points, key=lambda p: (p.arm, p.resolution)):
        j = p.judgement
        row = [
            arm_display(p.arm),
            p.trained,
            f"{p.resolution} ({p.tokens})" if p.tokens else str(p.resolution),
            pm(*p.test, 100),
            pm(*p.val, 100),
            pm(j.t.mean, j.t.ci95, j.t.n, 100, signed=True) if j else "reference",
            boot_cell(j.boot) if j else "",
            p_cell(j) if j else "",
            p.verdict if j else "",
        ]
        if has_thr:
            row += [si(p.throughput) if p.throughput is not None else "—", "●" if p.on_front else ""]
        rows.append(row)
    k = max((p.judgement.family for p in points if p.judgement), default=0)
    source = res.throughput_from
    thr_text = (
        f"Throughput: inference images/s of the same model configuration at that side, from benchmark "
        f"study `{source}` (untrained weights cost the same); ● = on the accuracy–throughput front "
        "(no other point has both more test top-1 and more images/s)."
        if has_thr
        else (
            "No throughput: name a benchmark study of the same model configs in the study file "
            "(`analysis: {throughput_from: NAME}`) or pass `--throughput-from NAME` to place each point "
            "on the accuracy–throughput front." + (f" ({res.throughput_note})" if res.throughput_note else "")
        )
    )
    return [
        "## Accuracy at each evaluation resolution",
        "",
        "Every finished model evaluated with images resampled to each side, patch size fixed (more "
        "tokens; learned position embeddings resampled bicubically). Top-1: mean ± 95 % t over seeds. "
        "Δ: against the reference arm at the same side, judged as the verdicts above (seeds × test "
        f"images bootstrap and seed-paired t, both must pass; margin ±{100 * res.margin:g}; Holm over "
        f"the k = {k} comparisons of this table). Nothing selected on these numbers.",
        "",
        thr_text,
        "",
        *table(header, rows),
    ]


def front_lines(res: AnalysisResult) -> list[str]:
    """The front in words, for the CLI: '<mixer> · <regime> at 44 px: 71.2 %, 1.2k img/s'."""
    front = sorted((p for p in res.resolution_points if p.on_front), key=lambda p: -(p.throughput or 0))
    return [
        f"{arm_display(p.arm)} at {p.resolution} px: {100 * p.test[0]:.1f} %, {si(p.throughput)} img/s"
        for p in front
        if p.throughput is not None and math.isfinite(p.test[0])
    ]
