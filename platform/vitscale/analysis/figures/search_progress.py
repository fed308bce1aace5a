"""Best-so-far against compute spent: one step line per searcher (and arm), the median over its
sampler seeds with their range shaded; a colour per searcher where several ran, else the arm's
mixer colour, and the arm's regime as line style (`models.facts` declarations)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.ticker import FuncFormatter

from vitscale.analysis.figures.canvas import axes, save, short
from vitscale.analysis.figures.style import mixer_color, regime_line
from vitscale.analysis.statistics.search_progress import (
    REFERENCE_SEARCHER,
    TRIALS,
    SearcherSummary,
    SearchLine,
    best_along,
)
from vitscale.tracking.layout import arm_display, parse_arm

FILE_NAME = "search_progress"
X_LABELS = {
    "train_flops": "training FLOPs spent by the search (cumulative, trials in start order)",
    "images_seen": "training images seen by the search (cumulative; no train_flops logged)",
    TRIALS: "trials run (no train_flops or images_seen logged)",
}
SCALE = {"max": 100.0, "min": 1.0}  # a maximised score is an accuracy fraction: shown in %


def line_label(line: SearchLine | SearcherSummary) -> str:
    return f"{line.searcher} · {arm_display(line.arm)}" if line.arm else line.searcher


def _style(searcher: str, arm: str | None, searchers: list[str], index: int) -> dict:
    """Several searchers: a colour each (tab10), the arm's regime as line style; one searcher: the
    arm's mixer colour and regime style."""
    key = parse_arm(arm) if arm else {}
    mixer, regime = key.get("model.mixer"), key.get("model.regime")
    if len(searchers) > 1:
        color = colormaps["tab10"](searchers.index(searcher) % 10)
    else:
        color = mixer_color(mixer) if mixer else colormaps["tab10"](index % 10)
    return {"color": color, "ls": regime_line(regime) if regime else "-"}


def _x(line: SearchLine, unit: str) -> np.ndarray:
    return line.x if unit == line.x_unit else np.arange(1.0, line.best.size + 1)


def search_progress_figure(lines: list[SearchLine], metric: str, out_dir: Path) -> list[Path]:
    """The figure (PNG and SVG), or nothing without lines: one step line per searcher (and arm), the
    median over its sampler seeds with their range shaded where it ran with several."""
    if not lines:
        return []
    unit = lines[0].x_unit if len({ln.x_unit for ln in lines}) == 1 else TRIALS
    mode = lines[0].mode
    scale = SCALE[mode]
    ylabel = f"best {metric} so far{' (%)' if scale == 100 else ''} ({mode})"
    fig, ax = axes("Best-so-far validation score against compute spent", X_LABELS[unit], ylabel)
    groups: dict[tuple[str, str | None], list[SearchLine]] = {}
    for line in lines:
        groups.setdefault((line.searcher, line.arm), []).append(line)
    searchers = sorted({ln.searcher for ln in lines}, key=lambda n: (n != REFERENCE_SEARCHER, n))
    for i, ((searcher, arm), group) in enumerate(groups.items()):
        style = _style(searcher, arm, searchers, i)
        x = np.unique(np.concatenate([_x(ln, unit) for ln in group]))
        x = x[x <= min(_x(ln, unit)[-1] for ln in group)]  # where every seed has a value
        ys = np.array([scale * best_along(_x(ln, unit), ln.best, x) for ln in group])
        label = line_label(group[0]) + (f" (median of {len(group)} seeds)" if len(group) > 1 else "")
        with np.errstate(all="ignore"):
            middle = np.nanmedian(ys, axis=0) if len(group) > 1 else ys[0]
        ax.step(x, middle, where="post", lw=1.8, label=label, **style)
        ax.plot(x, middle, ls="none", marker="o", ms=2.5, color=style["color"])
        if len(group) > 1:
            with np.errstate(all="ignore"):
                low, high = np.nanmin(ys, axis=0), np.nanmax(ys, axis=0)
            ax.fill_between(x, low, high, step="post", color=style["color"], alpha=0.15, lw=0)
    if unit != TRIALS:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    ax.set_xlim(left=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return save(fig, out_dir, FILE_NAME)
