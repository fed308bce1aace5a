"""`report.md`: the paper's tables from an AnalysisResult, with relative links to CSVs and figures.

Only data from the runs table goes in (no paths, clocks or tracking URIs), so the report drawn from
MLflow and the one redrawn from runs.parquet are the same text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow.compute as pc

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.report.arms import arms_section, delta_section
from vitscale.analysis.report.axes import axes_section
from vitscale.analysis.report.bench import bench_sections
from vitscale.analysis.report.compute_optimal import compute_section
from vitscale.analysis.report.curves import curves_section
from vitscale.analysis.report.markdown import figure, num, outcomes, pm, si, table
from vitscale.analysis.report.resolution import resolution_section
from vitscale.analysis.report.search_progress import search_progress_section
from vitscale.analysis.report.transfer import transfer_section
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.exponents import METHOD_LABELS, QUANTITY_LABELS
from vitscale.analysis.statistics.fits import FLOOR_MARGIN, MIN_DISTINCT_P
from vitscale.analysis.statistics.importance import MIN_CONFIGS
from vitscale.analysis.statistics.varies import distinct_values
from vitscale.models.registry import BASELINE, CANDIDATE, regime_order
from vitscale.tracking.layout import arm_display


def header_lines(res: AnalysisResult) -> list[str]:
    """Title, the outcome counts in the kind's words (a benchmark's runs are measured, not
    trained), and what the statistics use."""
    c, kind = res.counts(), res.study_kind
    parents = ", ".join(f"`{p}`" for p in res.parent_run_ids) or "—"
    confirmation = f", {c['confirmation']} confirmation" if c["confirmation"] else ""
    phases = f" ({c['tuning']} tuning{confirmation}, {c['final']} final)" if c["final"] else ""
    incomplete = "scored as chance" if res.policy == "chance" else "dropped"
    return [
        f"# {res.study}: analysis",
        "",
        f"{kind.title} study · {c['runs']} trial runs{phases}: {kind.report_counts.format(**c)} · "
        f"parent run(s): {parents}",
        "",
        kind.report_statistics.format(incomplete=incomplete, policy=res.policy),
        "",
    ]


def paper_table(res: AnalysisResult) -> list[str]:
    """Per regime and width: top-1 and params of attention and SSoG, and SSoG's difference."""
    agg = res.aggregates.filter(pc.greater(res.aggregates.column("n_used"), 0))
    if "val_top1_mean" not in agg.column_names or res.comparison:  # comparison: the Δ and Arms sections
        return []
    mix, reg, wid = (agg.column(c).to_pylist() for c in ("mixer", "regime", "width"))
    top1, ci, n = (as_float(agg.column(c)) for c in ("val_top1_mean", "val_top1_ci95", "val_top1_n"))
    params = (
        as_float(agg.column("params_mean"))
        if "params_mean" in agg.column_names
        else np.full(len(mix), np.nan)
    )
    cells: dict[tuple, list[int]] = {}
    for i in range(agg.num_rows):
        cells.setdefault((reg[i], wid[i], mix[i]), []).append(i)
    arm_key = {a.label: a.key for a in res.arms}
    deltas = {
        (arm_key[c.candidate].get("model.regime"), arm_key[c.candidate].get("model.width")): c.val
        for c in res.comparisons
        if c.val is not None and arm_key[c.candidate].get("model.mixer") == CANDIDATE
    }
    best = {k: max(v, key=lambda i: (np.nan_to_num(top1[i], nan=-1.0), -i)) for k, v in cells.items()}
    rows, several = [], False
    for regime in regime_order([r for r in reg if r]):
        for width in sorted({w for w in wid if w is not None}):
            a, s = best.get((regime, width, BASELINE)), best.get((regime, width, CANDIDATE))
            if a is None and s is None:
                continue
            several |= any(len(cells.get((regime, width, m), [])) > 1 for m in (BASELINE, CANDIDATE))
            row = [regime, str(width)]
            for i in (a, s):
                row += ["—", "—"] if i is None else [pm(top1[i], ci[i], n[i], 100), si(params[i])]
            if a is not None and s is not None:
                d = deltas.get((regime, str(width)))
                dtext = pm(d.mean, d.ci95, d.n, 100, signed=True) if d else "—"
                row += [dtext, f"{100 * (params[s] / params[a] - 1):+.1f} %"]
            else:
                row += ["—", "—"]
            rows.append(row)
    if not rows:
        return []
    out = ["## Top-1 by regime and width", ""]
    out += table(
        [
            "regime",
            "width",
            f"{BASELINE} top-1 (%)",
            f"{BASELINE} params",
            f"{CANDIDATE} top-1 (%)",
            f"{CANDIDATE} params",
            "Δ val top-1 (points, seed-paired)",
            "Δ params",
        ],
        rows,
    )
    out += [
        "Δ val is information (validation chose these configurations); verdicts on test and the counts "
        "of failed, stopped-early and did-not-train runs per Δ: *Δ top-1 against the reference*.",
        "",
    ]
    if several:
        out += [
            "Where a cell holds several configurations, the one with the best mean top-1 is shown "
            "(all are under *All configurations*).",
            "",
        ]
    return out


def configurations_table(res: AnalysisResult) -> list[str]:
    agg = res.aggregates
    cols = agg.column_names
    get = {c: as_float(agg.column(c)) for c in cols if c.endswith(("_mean", "_ci95", "_n"))}
    rows = []
    for i in range(agg.num_rows):
        row = [str(agg.column(c)[i].as_py()) for c in ("regime", "mixer", "width")]
        if "val_top1_mean" in get:
            row.append(pm(get["val_top1_mean"][i], get["val_top1_ci95"][i], get["val_top1_n"][i], 100))
        for m in ("params", "flops_per_image", "nfe_mean"):
            if f"{m}_mean" in get:
                row.append(si(get[f"{m}_mean"][i]) if m != "nfe_mean" else num(float(get[f"{m}_mean"][i]), 3))
        row += [str(agg.column(c)[i].as_py()) for c in ("n_runs", "n_used", "n_failed", "n_stopped_early")]
        rows.append(row + [str(agg.column(c)[i].as_py()) for c in res.settings])
    header = ["regime", "mixer", "width"] + (["top-1 (%)"] if "val_top1_mean" in get else [])
    header += [
        h
        for m, h in (("params", "params"), ("flops_per_image", "FLOPs/image"), ("nfe_mean", "NFE"))
        if f"{m}_mean" in get
    ]
    header += ["runs", "used", "failed", "stopped early", *res.settings]
    title = "## All configurations"
    if res.comparison:
        title += " (the tuned recipes over seeds; each arm's tuning trials: arms table, runs.parquet)"
    return [title, "", *table(header, rows)]


def fronts_section(res: AnalysisResult) -> list[str]:
    """Each training front as a table; a front whose cost takes one value is one line instead."""
    out, flat = ["## Pareto fronts", ""], []
    for f in res.fronts:
        values = distinct_values(res.aggregates, f"{f.x}_mean")
        if len(values) < 2:
            flat.append(f"{f.x} ({', '.join(num(v, 3) for v in values) or 'none'})")
            continue
        out += [f"### {f.y} vs {f.x} ([pareto_{f.name}.csv](pareto_{f.name}.csv))", ""]
        t = f.table
        xs, ys, ci, n = (
            as_float(t.column(c)) for c in (f"{f.x}_mean", "val_top1_mean", "val_top1_ci95", "val_top1_n")
        )
        rows = [
            [
                str(t.column("mixer")[i].as_py()),
                str(t.column("regime")[i].as_py()),
                str(t.column("width")[i].as_py()),
                si(xs[i]) if f.x != "nfe_mean" else num(float(xs[i]), 3),
                pm(ys[i], ci[i], n[i], 100),
                *(str(t.column(c)[i].as_py()) for c in res.settings),
            ]
            for i in range(t.num_rows)
        ]
        out += table(["mixer", "regime", "width", f.x, "top-1 (%)", *res.settings], rows)
    if flat:
        out += [f"Not shown: val_top1 against {' and '.join(flat)}, one value for every configuration.", ""]
    return out if len(out) > 2 else []


def fits_section(res: AnalysisResult) -> list[str]:
    """The fits with what bounds their trust: dof, leave-one-size-out error, what the bootstrap
    resampled, and whether the floor c lies below every observation (extrapolated)."""
    if not res.fits:
        return []
    if all(f.status != "ok" and f.n_distinct < 2 for f in res.fits):  # size never varies: no law
        return ["No scaling-law fit: every mixer × regime ran at one size.", ""]
    rows, notes, unresampled = [], [], {}
    for f in res.fits:
        g = f"{f.group['mixer']} · {f.group['regime']}"
        if f.status != "ok":
            notes.append(f"- {g}: {f.reason} ({f.n_runs} runs)")
            continue
        if f.at_bound:
            notes.append(f"- {g}: at a bound: {', '.join(f.at_bound)} (its interval is not trustworthy)")
        if f.bootstrap_note:
            unresampled.setdefault(f.bootstrap_note, []).append(g)
        ci = {k: f"[{v[0]:.3g}, {v[1]:.3g}]" for k, v in f.ci.items()}
        c_ci = f" [{', '.join(f'{100 * v:.2f}' for v in f.ci['c'])}]" if "c" in f.ci else ""
        mark = {True: " extrapolated", None: " ?"}.get(f.floor_extrapolated, "")
        loso = "—" if f.loso_rms is None else f"{f.loso_rms:.2f} ({f.loso_max:.2f})"
        rows.append(
            [
                f.group["mixer"],
                f.group["regime"],
                f"{f.b:.3f} {ci.get('b', '')}".rstrip(),
                f"{f.a:.3g} {ci.get('a', '')}".rstrip(),
                f"{100 * f.c:.2f} %{c_ci}{mark}",
                f"{f.n_distinct} ({f.dof})",
                loso,
                f"{f.n_boot_ok}/{f.n_boot} {f.bootstrap}",
                outcomes(f.counts),
            ]
        )
    notes += [f"- {', '.join(gs)}: {why}" for why, gs in unresampled.items()]
    out = [
        "## Scaling-law fits: error(P) = a·P^(−b) + c",
        "",
        "Fitted on finished runs (error = 1 − validation top-1, P = parameters) with at least "
        f"{MIN_DISTINCT_P} distinct sizes, in log space with a Huber loss from a grid of starts "
        "(Besiroglu et al. 2024); 95 % bootstrap intervals in brackets ([fits.json](fits.json)). "
        "*dof*: sizes − 3 fitted parameters. *LOSO*: refit without each size and predict it; RMS "
        "(worst) miss in points of error. *bootstrap*: resamples that succeeded, and what they redrew "
        "(seeds within each size, or whole runs when a size has one; +images: the validation images "
        "too). c is *extrapolated* when its interval reaches ~0 or every size's mean error lies above "
        f"it by more than {FLOOR_MARGIN:g}× the interval's half-width (no run reached the floor); "
        "*?* where no interval lets that be judged.",
        "",
    ]
    if rows:
        header = ["mixer", "regime", "b", "a", "c (error floor)", "sizes (dof)", "LOSO RMS (max), points"]
        out += table([*header, "bootstrap", "runs"], rows)
    return out + notes + ([""] if notes else [])


def exponents_section(res: AnalysisResult) -> list[str]:
    if not res.cost_exponents:
        return []
    rows = [
        [
            e["series"],
            e["regime"],
            e["setting"] or "—",
            QUANTITY_LABELS.get(e["quantity"], e["quantity"]),
            METHOD_LABELS.get(e.get("method", "ols"), "?"),
            f"{e['slope']:.3f}" + (f" [{e['ci'][0]:.3f}, {e['ci'][1]:.3f}]" if e["ci"] else ""),
            f"{e['r2']:.3f}" if e["r2"] is not None else "—",
            str(e["n"]),
        ]
        for e in res.cost_exponents
    ]
    return [
        "## Cost exponents (slope of log cost against log tokens)",
        "",
        "The mixer's own FLOPs (`mixing_flops`: ~N² for a dense N × N mixer, ~N^1.5 for a separable "
        "one) give its exponent; total FLOPs mix in the projections and MLPs, whose cost grows as N, "
        "and understate it at small grids. The local slope between the two largest resolutions is "
        "the one closest to the asymptote.",
        "",
        *table(
            ["series", "regime", "setting", "quantity", "estimate", "slope [95 % CI]", "r²", "points"], rows
        ),
    ]


def failures_section(res: AnalysisResult, limit: int = 100) -> list[str]:
    """Every trial left out of the statistics, and every did-not-train trial (up to `limit` rows;
    runs.parquet has them all)."""
    title, none, columns = res.study_kind.failures  # a benchmark neither trains nor stops early
    cols = dict(columns)
    t = res.runs
    keep = pc.invert(t.column("used"))
    if "did_not_train" in cols and "did_not_train" in t.column_names:
        keep = pc.or_(keep, pc.fill_null(t.column("did_not_train"), False))
    bad = t.filter(keep)
    out = [f"## {title}", ""]
    if not bad.num_rows:
        return out + [none, ""]
    rows = [
        [num(bad.column(c)[i].as_py()) if bad.column(c)[i].as_py() is not None else "—" for c in cols]
        for i in range(min(bad.num_rows, limit))
    ]
    out += table(list(cols.values()), rows)
    if bad.num_rows > limit:
        out += [f"… and {bad.num_rows - limit} more (all of them are in runs.parquet).", ""]
    return out


def importance_section(res: AnalysisResult) -> list[str]:
    """One table with an arm column: per arm its fANOVA shares, or why it has none."""
    if not res.importance or res.importance_path is None:
        return []
    name = res.importance_path.name
    rows = []
    for g in res.importance:
        spread = "—" if g["spread"] is None else f"{100 * g['spread']:.2f}"
        head = [arm_display(g["arm"]), f"{g['runs']} ({g['configs']})", spread]
        rows += [[*head, r["parameter"], f"{r['importance']:.3f}"] for r in g["importance"]]
        if not g["importance"]:
            rows.append([*head, "—", g["reason"]])
    scope = (
        "each arm's own tuning runs only (phase tune; never the final seeds, never pooled across arms)"
        if res.comparison
        else "each mixer × regime cell with more than one configuration, never pooled across cells"
    )
    return [
        f"## Which searched parameters mattered, per arm (fANOVA, [{name}]({name}))",
        "",
        f"Over {scope}: pooled, a parameter whose range differs between arms takes the credit for the "
        "arm difference. Importances are shares of the variance explained within the arm (they sum to 1 "
        "however small its spread of validation top-1, the range over its runs); an arm with fewer than "
        f"{MIN_CONFIGS} distinct configurations gets no numbers.",
        "",
        *table(["arm", "runs (configs)", "val top-1 spread (points)", "parameter", "importance"], rows),
    ]


def figures_section(res: AnalysisResult) -> list[str]:
    """Every figure not shown in its own section (learning curves, search progress: their own)."""
    own = set(res.curve_figures) | set(res.search_figures)
    pngs = [p for p in res.figure_paths if p.suffix == ".png" and p not in own]
    out = ["## Figures", ""]
    for p in pngs:
        out += figure(p, res.out_dir)
    return out if pngs else []


SECTIONS: dict[str, Callable[[AnalysisResult], list[str]]] = {  # the names StudyKind.report_sections lists
    "paper_table": paper_table,
    "deltas": delta_section,
    "arms": arms_section,
    "curves": curves_section,
    "search_progress": search_progress_section,
    "transfer": transfer_section,
    "resolution": resolution_section,
    "axes": lambda res: axes_section(res.axes),
    "configurations": configurations_table,
    "fronts": fronts_section,
    "fits": fits_section,
    "compute": compute_section,
    "benchmark": bench_sections,
    "exponents": exponents_section,
    "importance": importance_section,
    "failures": failures_section,
    "figures": figures_section,
}


def render(res: AnalysisResult) -> str:
    """The whole report as markdown text: the header, then the kind's sections in its order."""
    body = [line for name in res.study_kind.report_sections for line in SECTIONS[name](res)]
    return "\n".join(header_lines(res) + body).rstrip() + "\n"


def write_report(res: AnalysisResult, path: Path) -> Path:
    path.write_text(render(res))
    res.report_path = path
    return path
