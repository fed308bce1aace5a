"""The other-axes section of report.md and its CSV (analysis.statistics.axes): test error per level of the
number of Gaussians, the solver tolerance (with NFE), the training resolution and the evaluation
side, per mixer × regime × fixed setting, with the trend or why there is none."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from vitscale.analysis.figures.axes import FOOTNOTE, figure_name, trend_text
from vitscale.analysis.report.markdown import num, outcomes, pm, table
from vitscale.analysis.statistics.axes import MIN_TREND_LEVELS, AxisCurve, AxisLevel, AxisStudy

CSV = "axes.csv"
POLICY_WORDS = {
    "drop": "failed, stopped-early and killed runs are left out of the means (counted under runs)",
    "chance": "failed, stopped-early and killed runs count as chance-level error (counted under runs)",
}


def _level_cell(curve: AxisCurve, level: AxisLevel) -> str:
    text = num(level.x)
    riding = ", ".join(f"{k.rsplit('.', 1)[-1]} {num(v)}" for k, v in level.riding.items())
    return f"{text} ({riding})" if riding else text


def _trend_line(curve: AxisCurve) -> str:
    t = curve.trend
    if t.status != "ok":
        return f"- {curve.label}: {t.reason or t.status}"
    how = "seeds within levels" if t.fit is not None else "whole seeds"
    line = f"- {curve.label}: {t.quantity}: {trend_text(curve)} (95 % bootstrap over {how}, {t.n_boot_ok}/{t.n_boot} resamples)"
    if t.fit is not None:
        line += f"; a = {num(t.fit.a, 3)}, c = {100 * t.fit.c:.2f} % error, {t.n_levels} levels"
    return line + (f"; {t.reason}" if t.reason else "")


def axes_section(studies: list[AxisStudy], figures_dir: str = "figures") -> list[str]:
    """One subsection per varying axis: a table per level and curve, the trends, the figure's caption."""
    if not studies:
        return []
    policy = studies[0].policy
    out = [
        "## Error along the other axes",
        "",
        "Test error = 1 − test top-1, mean ± 95 % t-interval over seeds (n), per level. A line compares "
        "only runs that differ in its axis alone (every other param held fixed; another width or "
        f"learning rate is another line); {POLICY_WORDS[policy]}. A trend is fitted only through "
        f">= {MIN_TREND_LEVELS} levels with results. Reported on test; nothing selected on these numbers.",
        "",
    ]
    for study in studies:
        cost = any(c.cost_metric for c in study.curves)
        header = ["line", study.axis.x_label([c.x_param for c in study.curves]), "test error (%)"]
        header += [
            f"NFE ({', '.join(sorted({c.cost_metric for c in study.curves if c.cost_metric}))})"
        ] * cost
        header += ["runs"]
        rows = []
        for curve in study.curves:
            for level in curve.levels:
                row = [curve.label, _level_cell(curve, level), pm(*level.error, 100)]
                if cost:
                    row.append(pm(*level.cost, digits=1) if level.cost else "—")
                rows.append([*row, outcomes(level.counts)])
        name = figure_name(study)
        caption = (
            f"Figure [{name}]({figures_dir}/{name}.png) ([svg]({figures_dir}/{name}.svg)): "
            f"{study.axis.title}; {FOOTNOTE}"
            + ("; the lower panel is the NFE per level, bars clipped at 0." if cost else ".")
        )
        out += [f"### {study.axis.title}", "", *table(header, rows)]
        out += ["Trends:", "", *(_trend_line(c) for c in study.curves), "", caption, ""]
    return out


def axes_rows(studies: list[AxisStudy]) -> list[dict]:
    """One row per (axis, line, level); the line's trend repeated on each of its rows."""
    rows = []
    for study in studies:
        for c in study.curves:
            t = c.trend
            for level in c.levels:
                cost = level.cost or (None, None, None)
                rows.append(
                    {
                        "axis": study.axis.name,
                        "mixer": c.mixer,
                        "regime": c.regime,
                        "line": c.label,
                        "x_param": c.x_param,
                        "x": level.x,
                        "riding": "; ".join(f"{k}={v:g}" for k, v in level.riding.items()) or None,
                        "error_mean": level.error[0],
                        "error_ci95": level.error[1],
                        "error_n": level.error[2],
                        **{
                            k: level.counts.get(k)
                            for k in ("n_runs", "n_used", "n_failed", "n_stopped_early")
                        },
                        "policy": study.policy,
                        "cost_metric": c.cost_metric,
                        "cost_mean": cost[0],
                        "cost_ci95": cost[1],
                        "cost_n": cost[2],
                        "trend": t.kind,
                        "trend_status": t.status,
                        "trend_quantity": t.quantity or None,
                        "trend_estimate": t.estimate,
                        "trend_low": t.ci[0] if t.ci else None,
                        "trend_high": t.ci[1] if t.ci else None,
                        "trend_levels": t.n_levels,
                        "trend_reason": t.reason,
                    }
                )
    return rows


def write_axes_csv(studies: list[AxisStudy], out_dir: Path) -> Path | None:
    """axes.csv in `out_dir`; None (no file) when no axis varies."""
    rows = axes_rows(studies)
    if not rows:
        return None
    path = Path(out_dir) / CSV
    pacsv.write_csv(pa.Table.from_pylist(rows), path)
    return path
