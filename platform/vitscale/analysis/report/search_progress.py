"""Search progress in report.md: the best-so-far figure and, per searcher (and arm) over its sampler
seeds, the best reached at the compute every searcher of the arm spent, its difference from TPE's,
the final best and the compute it took to come within 1 % of it."""

from __future__ import annotations

import math

from vitscale.analysis.figures.search_progress import SCALE, X_LABELS, line_label
from vitscale.analysis.report.markdown import figure, si, table
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.search_progress import (
    NEAR_BEST,
    REFERENCE_SEARCHER,
    TRIALS,
    SearcherSummary,
)


def _amount(value: float, unit: str) -> str:
    return f"{value:.0f}" if unit == TRIALS else si(value)


def _score(stat: tuple[float, float, float, int], scale: float) -> str:
    """'87.31 ± 0.42' (mean ± CI half-width over seeds), '87.31' for one seed, '—' for none."""
    mean, _, half, _ = stat
    if not math.isfinite(mean):
        return "—"
    return f"{scale * mean:.2f}" + (f" ± {scale * half:.2f}" if math.isfinite(half) else "")


def _versus(s: SearcherSummary, scale: float) -> str:
    if s.versus is None:
        return "reference" if s.searcher == REFERENCE_SEARCHER else "—"
    diff, half = s.versus
    if not math.isfinite(diff):
        return "—"
    return f"{scale * diff:+.2f}" + (
        f" [{scale * (diff - half):+.2f}, {scale * (diff + half):+.2f}]" if math.isfinite(half) else ""
    )


def search_progress_section(res: AnalysisResult) -> list[str]:
    """The section, or nothing for a study that did not search (grid) or recorded no searcher."""
    if not res.search_summaries:
        return []
    metric = res.search_metric
    first = res.search_summaries[0]
    scale = SCALE[first.mode]
    pct = " (%)" if scale == 100 else ""
    rows = [
        [
            line_label(s),
            str(s.seeds),
            f"{s.trials:.3g}",
            _amount(s.spent, s.x_unit),
            _amount(s.equal_compute, s.x_unit),
            _score(s.at_equal, scale),
            _versus(s, scale),
            _score(s.final, scale),
            _amount(s.to_reach, s.x_unit),
        ]
        for s in res.search_summaries
    ]
    compared = any(s.versus is not None for s in res.search_summaries)
    out = [
        "## Search progress: best-so-far against compute",
        "",
        f"Each searcher's (and arm's) best `{metric}` so far over its search trials in the order they "
        f"started, against the compute they had spent ({X_LABELS[first.x_unit]}); failed trials spend "
        "compute without scoring. Searchers are read at **equal compute**: the least any line of the "
        "arm spent. Values are means over sampler seeds ± the 95 % t interval"
        + (
            f"; the difference from {REFERENCE_SEARCHER} has Welch's 95 % interval in brackets"
            if compared
            else ""
        )
        + ". A line that reaches its best early had budget to spare.",
        "",
        *table(
            [
                "searcher · arm",
                "sampler seeds",
                "trials per seed",
                "compute per seed",
                "equal compute",
                f"best {metric} at equal compute{pct}",
                f"vs {REFERENCE_SEARCHER}{' (points)' if scale == 100 else ''}",
                f"final best{pct}",
                f"compute to reach {NEAR_BEST:.0%} of it (median)",
            ],
            rows,
        ),
    ]
    for p in res.search_figures:
        out += figure(p, res.out_dir) if p.suffix == ".png" else []
    return out
