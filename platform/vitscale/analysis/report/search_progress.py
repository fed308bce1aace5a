"""Search progress in report.md: the best-so-far figure and, per line, the final best and the
compute it took to come within 1 % of it (how much of the budget the search needed)."""

from __future__ import annotations

from vitscale.analysis.figures.search_progress import SCALE, X_LABELS, line_label
from vitscale.analysis.report.markdown import figure, si, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.search_progress import NEAR_BEST, TRIALS


def _amount(value: float, unit: str) -> str:
    return f"{value:.0f}" if unit == TRIALS else si(value)


def search_progress_section(res: AnalysisResult) -> list[str]:
    """The section, or nothing for a study that did not search (grid) or recorded no searcher."""
    if not res.search_lines:
        return []
    metric = res.search_metric
    rows = []
    for line in res.search_lines:
        scale = SCALE[line.mode]
        final = f"{scale * line.final:.2f}" if line.final == line.final else "—"
        rows.append(
            [
                line_label(line),
                str(line.best.size),
                final,
                _amount(line.compute_to_reach(), line.x_unit),
                _amount(float(line.x[-1]), line.x_unit),
                line.x_unit,
            ]
        )
    out = [
        "## Search progress: best-so-far against compute",
        "",
        f"Each searcher's (and arm's) best `{metric}` so far over its search trials in the order they "
        f"started, against the compute they had spent ({X_LABELS[res.search_lines[0].x_unit]}); "
        "failed trials spend compute without scoring. A line that reaches its best early had budget "
        "to spare.",
        "",
        *table(
            [
                "searcher · arm",
                "trials",
                f"final best {metric}{' (%)' if SCALE[res.search_lines[0].mode] == 100 else ''}",
                f"compute to reach {NEAR_BEST:.0%} of it",
                "compute spent",
                "compute unit",
            ],
            rows,
        ),
    ]
    for p in res.search_figures:
        out += figure(p, res.out_dir) if p.suffix == ".png" else []
    return out
