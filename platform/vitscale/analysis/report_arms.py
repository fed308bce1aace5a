"""Arm sections of report.md and their CSVs: each arm's top-1 (validation and test) with its
outcome counts, the seed-paired Δ against the reference arm, and for comparison studies the
tuning budget, tuned configuration and edge-of-range flags."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv

from vitscale.analysis.arms import METRICS
from vitscale.analysis.markdown import outcomes, pm, table
from vitscale.analysis.result import AnalysisResult
from vitscale.tracking.layout import arm_display

POLICY_TEXT = {
    "drop": "Runs that failed, were stopped early or were killed are **dropped** from these means and Δ "
    "(`--incomplete chance` scores them as chance, 1 / classes, instead).",
    "chance": "Runs that failed, were stopped early or were killed are **scored as chance** "
    "(1 / classes) in these means and Δ (`--incomplete drop` leaves them out instead).",
}


def write_arms(res: AnalysisResult) -> None:
    """arms.csv (one row per arm) and deltas.csv (one row per arm × metric Δ) in the output folder."""
    if not res.arms:
        return
    arm_rows = []
    for arm in res.arms:
        row = {"arm": arm.label, "policy": res.policy, **arm.counts}
        for m in METRICS:
            mean, half, n = arm.stats.get(m, (float("nan"), float("nan"), 0))
            row.update({f"{m}_mean": mean, f"{m}_ci95": half, f"{m}_n": n})
        row["config"] = json.dumps(arm.config, sort_keys=True, default=str)
        if arm.tuning is not None:
            row.update({f"tune_{k}": v for k, v in arm.tuning["budget"].items()})
            row["tuned"] = json.dumps(arm.tuning["tuned"], sort_keys=True, default=str)
            row["at_edge"] = json.dumps(arm.tuning["edges"], sort_keys=True)
        arm_rows.append(row)
    pacsv.write_csv(pa.Table.from_pylist(arm_rows), res.out_dir / "arms.csv")
    if res.deltas:
        delta_rows = [
            {
                "arm": d.candidate,
                "reference": d.reference,
                "metric": d.metric,
                "delta_mean": d.delta.mean,
                "delta_ci95": d.delta.ci95,
                "n_pairs": d.delta.n,
                "seeds": json.dumps(d.delta.seeds, default=str),
                "verdict": d.verdict,
                "policy": res.policy,
            }
            for d in res.deltas
        ]
        pacsv.write_csv(pa.Table.from_pylist(delta_rows), res.out_dir / "deltas.csv")


def delta_section(res: AnalysisResult) -> list[str]:
    """Δ top-1 of each arm against its reference, validation and test, with both arms' outcomes."""
    if not res.deltas:
        return []
    by_label = {a.label: a for a in res.arms}
    cells: dict[tuple[str, str], dict] = {}
    for d in res.deltas:
        cells.setdefault((d.candidate, d.reference), {})[d.metric] = d
    rows = []
    for (cand, ref), ds in cells.items():
        val, test = ds.get("val_top1"), ds.get("test_top1")
        rows.append(
            [
                arm_display(cand),
                arm_display(ref),
                pm(val.delta.mean, val.delta.ci95, val.delta.n, 100, signed=True) if val else "—",
                pm(test.delta.mean, test.delta.ci95, test.delta.n, 100, signed=True) if test else "—",
                val.verdict if val else "—",
                outcomes(by_label[cand].counts),
                outcomes(by_label[ref].counts),
            ]
        )
    ref_text = ", ".join(f"{k}={v}" for k, v in res.reference.items())
    return [
        "## Δ top-1 against the reference (seed-paired)",
        "",
        f"Δ = arm − reference ({ref_text}) in points, the mean of per-seed differences (paired by "
        "`train.seed`) ± its 95 % Student-t interval, n = seeds both arms have. The verdict reads "
        "validation only; test is evaluated once per finished trial and only reported. "
        + POLICY_TEXT[res.policy],
        "",
        *table(
            [
                "arm",
                "reference",
                "Δ val top-1",
                "Δ test top-1",
                "verdict (val)",
                "arm runs",
                "reference runs",
            ],
            rows,
        ),
    ]


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
                ", ".join(f"{k}={v}" for k, v in t["tuned"].items()) or "— (search space unknown)",
                ", ".join(f"⚠ {k} ({e})" for k, e in t["edges"].items()) or "none",
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
            "⚠: the tuned value lies at the edge of the searched range (within 5 %, log scale for "
            "loguniform): the optimum may lie outside it, so that arm may be under-tuned.",
            "",
        ]
    return ["## Arms", "", intro + " " + POLICY_TEXT[res.policy], "", *table(header, rows), *notes]
