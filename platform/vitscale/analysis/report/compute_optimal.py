"""The compute-optimal section of report.md and compute_optimal.json (analysis.statistics.compute_optimal)."""

from __future__ import annotations

import json
from pathlib import Path

from vitscale.analysis.report.markdown import outcomes, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.compute_optimal import EXTEND, ComputeOptimal
from vitscale.analysis.statistics.compute_points import BACKWARD_FACTOR
from vitscale.analysis.statistics.data_law import MIN_LEVELS, MIN_SIZES
from vitscale.analysis.statistics.fits import HUBER_DELTA, clean_json
from vitscale.analysis.statistics.frontier import REPORT_EVERY
from vitscale.analysis.statistics.isoflop import MIN_INTERIOR, N_BUDGETS

JSON_FILE = "compute_optimal.json"
RULES = {
    "error": "1 - test_top1 of finished runs (comparison studies: the final phase)",
    "N": "params",
    "D": "images_seen; else data.num_train x train.epochs (per group: D_source)",
    "C": f"train_flops; else {BACKWARD_FACTOR:g} x flops_per_image x D (per group: C_source)",
    "law": (
        f"E + A/N^alpha + B/D^beta; Huber (delta={HUBER_DELTA}) on log error, LSE form, L-BFGS-B from a "
        f"grid of starts; refused below {MIN_SIZES} sizes or {MIN_LEVELS} data levels; dof = (N, D) cells - 5"
    ),
    "loso": "refit without each size from the grid, predict its cells: mean |log error|, RMSE in points",
    "bootstrap": (
        "seeds: runs resampled within each (N, D) cell; cases: whole runs (a cell has one run); "
        "+images: test images redrawn too, one draw for all runs"
    ),
    "isoflop": (
        f"{N_BUDGETS} log-spaced budgets where >= 3 sizes bracket C; per size log C - log error "
        "interpolation between its own data levels (no extrapolation); parabola in log N through the "
        f"minimum and 2 sizes either side; edge minima not used; a fitted with >= {MIN_INTERIOR} interior minima"
    ),
    "frontier": (
        "envelope: least cell-mean error with C <= budget; law: min over N at D = C / (kappa N^gamma); "
        f"drawn over C_min/{EXTEND:g}..C_max*{EXTEND:g}, extrapolated beyond the measured N, D or C"
    ),
    "gap": "candidate - reference error* at matched C over the common measured C range; crossing resolved "
    "when the interval excludes 0 with opposite signs before and after",
}


def write_compute_json(result: ComputeOptimal | None, out_dir: Path) -> Path | None:
    """compute_optimal.json: every group's law, isoFLOP minima, frontier, and the gaps; None
    (and a stale file removed) when no group has compute points."""
    path = out_dir / JSON_FILE
    if result is None or not result.analysed:
        path.unlink(missing_ok=True)
        return None
    doc = {"settings": RULES, **result.to_dict()}
    path.write_text(json.dumps(clean_json(doc), indent=2) + "\n")
    return path


def _ci(ci: list[float] | None, fmt: str = "{:.3f}", scale: float = 1.0) -> str:
    return f" [{fmt.format(scale * ci[0])}, {fmt.format(scale * ci[1])}]" if ci else ""


def law_rows(result: ComputeOptimal) -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    for g in result.groups:
        if g.points is None:
            notes.append(f"- {g.label}: {g.reason} ({outcomes(g.counts)})")
            continue
        f = g.law
        if not f.ok:
            notes.append(f"- {g.label}: {f.reason}")
            continue
        if f.at_bound:
            notes.append(
                f"- {g.label}: at a bound: {', '.join(f.at_bound)} (its interval is not trustworthy)"
            )
        if f.reason:
            notes.append(f"- {g.label}: {f.reason}")
        loso = "—" if f.loso_log_mae is None else f"{f.loso_log_mae:.3f} ({f.loso_rmse:.2f})"
        rows.append(
            [
                g.mixer,
                g.regime,
                f"{f.alpha:.3f}{_ci(f.ci.get('alpha'))}",
                f"{f.beta:.3f}{_ci(f.ci.get('beta'))}",
                f"{100 * f.E:.2f}{_ci(f.ci.get('E'), '{:.2f}', 100)}",
                f"{f.A:.3g}{_ci(f.ci.get('A'), '{:.3g}')}",
                f"{f.B:.3g}{_ci(f.ci.get('B'), '{:.3g}')}",
                f"{f.n_sizes} × {f.n_levels} ({f.n_cells}, {f.dof})",
                loso,
                "—" if g.a_law is None else f"{g.a_law:.3f}{_ci(g.a_law_ci)}",
                f"{f.n_boot_ok}/{f.n_boot} {f.bootstrap}",
                outcomes(g.counts),
            ]
        )
    return rows, notes


def isoflop_rows(result: ComputeOptimal) -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    for g in result.analysed:
        iso = g.isoflop
        if iso.status == "none":
            notes.append(f"- {g.label}: {iso.reason}")
            continue
        edge = sum(m.edge and m.n_opt is not None for m in iso.minima)
        a = "—" if iso.a is None else f"{iso.a:.3f}{_ci(iso.ci)}"
        boot = f"{iso.n_boot_ok}/{iso.n_boot}" if iso.a is not None else "—"
        rows.append(
            [
                g.mixer,
                g.regime,
                f"{iso.budgets[0]:.3g}–{iso.budgets[-1]:.3g}",
                str(iso.n_interior),
                str(edge),
                a,
                boot,
            ]
        )
        if iso.reason:
            notes.append(f"- {g.label}: {iso.reason}")
    return rows, notes


def gap_rows(result: ComputeOptimal) -> tuple[list[list[str]], list[str]]:
    rows, notes = [], []
    for gap in result.gaps:
        for r in gap.rows:
            ci = "" if r.low is None else f" [{100 * r.low:+.2f}, {100 * r.high:+.2f}]"
            mark = "extrapolation" if r.extrapolated else ""
            rows.append(
                [gap.regime, gap.candidate, gap.basis, f"{r.budget:.3g}", f"{100 * r.delta:+.2f}{ci}", mark]
            )
        notes.append(f"- {gap.regime}, {gap.candidate} − {gap.reference} ({gap.basis}): {gap.statement}")
    return rows, notes


def sources(result: ComputeOptimal) -> list[str]:
    seen: dict[tuple[str, str], list[str]] = {}
    for g in result.analysed:
        seen.setdefault((g.points.d_source, g.points.c_source), []).append(g.label)
    return [f"- {', '.join(gs)}: D = {d}; C = {c}" for (d, c), gs in seen.items()]


def _carried(result: ComputeOptimal) -> bool:
    """Whether any group has a law, an isoFLOP curve or a gap to show."""
    return bool(result.gaps) or any(g.law.ok or g.isoflop.status != "none" for g in result.analysed)


def compute_section(res: AnalysisResult) -> list[str]:
    """Per mixer x regime the law with intervals (or why it is refused), the isoFLOP exponent, the
    Δ at matched compute with the crossing statement, and how to read them."""
    result = res.compute
    if result is None:
        return []
    head = ["## Compute-optimal scaling (test error against N, D and training compute)", ""]
    if not result.analysed:
        return [*head, f"Not analysed: {result.reason or 'no finished run'}.", ""]
    if not _carried(result):
        designs = ", ".join(f"{g.label} {g.n_sizes} × {int(g.points.levels.size)}" for g in result.analysed)
        return [
            *head,
            f"Not analysed: no mixer × regime has the {MIN_SIZES} sizes × {MIN_LEVELS} data levels the law "
            f"needs, nor two sizes whose runs share a compute range (sizes × data levels: {designs}).",
            "",
        ]
    out = [
        *head,
        "How to read it: the law E + A/N^α + B/D^β (Hoffmann et al. 2022, approach 3, refitted as Besiroglu "
        "et al. 2024) is fitted per mixer × regime on test error of finished runs; α and β say how fast error "
        "falls with parameters N and training images D, E is the error no size or data removes (in %). "
        f"It is refused below {MIN_SIZES} sizes or {MIN_LEVELS} data levels. *cells, dof*: distinct (N, D) "
        "configurations and cells − 5. *LOSO*: refit without each size and predict its cells, mean |log error| "
        "(RMSE in points). isoFLOP minima (approach 2) are the best size at fixed compute from each size's "
        "own runs, interpolated, never extrapolated; a minimum at the edge of the sizes present is not used. "
        "*a*: N* ∝ C^a, from the isoFLOP minima and as implied by the law (β / (α + γβ), γ: FLOPs per "
        "image ∝ N^γ). Δ: candidate − reference error at the same training FLOPs along the frontier, in "
        "points (negative: the candidate is better); *extrapolation* where the fitted frontier lies outside "
        "the measured N or D. 95 % bootstrap intervals in brackets ([compute_optimal.json](compute_optimal.json)).",
        "",
        *sources(result),
        "",
    ]
    rows, notes = law_rows(result)
    if rows:
        header = ["mixer", "regime", "α", "β", "E (%)", "A", "B", "sizes × data levels (cells, dof)"]
        header += ["LOSO |log err| (RMSE, points)", "a (law)", "bootstrap", "runs"]
        out += table(header, rows)
    out += notes + ([""] if notes else [])
    rows, notes = isoflop_rows(result)
    if rows:
        out += ["### isoFLOP minima: N*(C) ∝ C^a", ""]
        out += table(
            ["mixer", "regime", "budgets (FLOPs)", "interior minima", "edge minima", "a", "bootstrap"], rows
        )
    out += notes + ([""] if notes else [])
    rows, notes = gap_rows(result)
    if rows:
        out += [f"### Δ test error at matched compute (candidate − {result.reference}, points)", ""]
        out += [
            f"At every {REPORT_EVERY}th of the budgets spanning the compute both measured; the crossing is judged on "
            "all of them.",
            "",
        ]
        out += table(["regime", "candidate", "basis", "C (FLOPs)", "Δ error [95 %]", "note"], rows)
        out += notes + [""]
    return out
