"""Does the low-fidelity ranking transfer? A comparison tuned at `search.fidelity` re-ran each arm's
top points at full fidelity (`tune.confirmation`) and chose among those: per arm a small table (the
points in their low-fidelity order, both validation scores, which was chosen), Spearman's ρ with
its n, and a note when full fidelity changed the choice; transfer.csv holds the same rows. Tuned at
a fidelity without confirmation, the section says the transfer was not shown.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.csv as pacsv

from vitscale.analysis.report.markdown import num, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.rank_correlation import MIN_POINTS
from vitscale.range_edge import number
from vitscale.tracking.layout import arm_display

CSV = "transfer.csv"


def _confirmed(res: AnalysisResult) -> list[tuple[str, dict]]:
    """(arm tag, its confirmation record) of every confirmed arm, in arm order."""
    return [
        (a.label, a.tuning["confirmation"]) for a in res.arms if a.tuning and a.tuning.get("confirmation")
    ]


def write_transfer(res: AnalysisResult) -> None:
    """transfer.csv: one row per confirmed point of every arm."""
    rows = [
        {
            "arm": arm,
            "low_rank": p["low_rank"],
            "point": json.dumps(p["point"], sort_keys=True, default=str),
            "low_fidelity_score": p["low_score"],
            "full_fidelity_score": p["full_score"],
            "chosen": p["chosen"],
            "metric": c.get("metric"),
            "seed": c.get("seed"),
            "rho": c.get("rho"),
            "n": c.get("n"),
        }
        for arm, c in _confirmed(res)
        for p in c["points"]
    ]
    if rows:
        pacsv.write_csv(pa.Table.from_pylist(rows), res.out_dir / CSV)


def _values(point: dict) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={number(v)}" for k, v in point.items()) or "the base trial"


def _headline(arm: str, c: dict) -> str:
    """'**ssog · ode** — ρ = 0.50 (n = 3); the choice changed: full fidelity chose low-fidelity rank 2
    over rank 1.'"""
    rho = (
        f"ρ = {c['rho']:.2f} (n = {c['n']})"
        if c.get("rho") is not None
        else f"ρ undefined ({c.get('rho_note')})"
    )
    text = f"**{arm_display(arm)}** — {rho}"
    chosen = next((p["low_rank"] for p in c["points"] if p["chosen"]), None)
    if c.get("changed") and chosen is not None:
        text += f"; **the choice changed**: full fidelity chose low-fidelity rank {chosen} over rank 1"
    elif chosen == 1:
        text += "; full fidelity kept the low-fidelity choice"
    return text + (f". {c['note'][0].upper()}{c['note'][1:]}." if c.get("note") else ".")


def transfer_section(res: AnalysisResult) -> list[str]:
    confirmed = _confirmed(res)
    if not confirmed:
        if res.comparison and res.tuning_fidelity:
            at = ", ".join(f"{k}={v}" for k, v in res.tuning_fidelity.items())
            return [
                "## Does the low-fidelity ranking transfer?",
                "",
                f"The arms were tuned at low fidelity ({at}) and no tuning point was re-run at full "
                "fidelity (`search.confirm.top_k: 0`, or an execution begun before confirmation "
                "existed): whether the low-fidelity ranking holds at full fidelity is **not shown**.",
                "",
            ]
        return []
    first = confirmed[0][1]
    metric = first.get("metric") or "the objective"
    at = ", ".join(f"{k}={v}" for k, v in (first.get("fidelity") or {}).items()) or "a lower fidelity"
    out = [
        f"## Does the low-fidelity ranking transfer? ([{CSV}]({CSV}))",
        "",
        f"Each arm was tuned at low fidelity ({at}); its top {first.get('top_k')} qualified points were "
        f"then re-run at full fidelity on tuning seed {first.get('seed')} (a seed selection had seen, never "
        f"a final seed), and the arm's configuration is the best of those runs on validation ({metric}); "
        "a failed or short run does not qualify. ρ: Spearman's rank correlation between the low- and "
        f"full-fidelity validation scores of the confirmed points, n of them (undefined below {MIN_POINTS}; "
        "1: the same order). The final runs and every verdict above use the chosen configuration.",
        "",
    ]
    header = ["low-fi rank", "configuration", f"low-fi {metric}", f"full-fi {metric}", "chosen"]
    for arm, c in confirmed:
        rows = [
            [
                str(p["low_rank"]) + (f" (#{p['sample']})" if p.get("sample") is not None else ""),
                _values(p["point"]),
                num(p["low_score"]),
                num(p["full_score"]) if p["full_score"] is not None else "— (did not qualify)",
                "✓" if p["chosen"] else "",
            ]
            for p in c["points"]
        ]
        out += [_headline(arm, c), "", *table(header, rows)]
    return out
