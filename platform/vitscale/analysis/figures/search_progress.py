"""Best-so-far against compute spent: one step line per searcher (and arm), the median over its
sampler seeds with their range shaded; a colour per searcher where several ran, else the arm's
mixer colour, and the arm's regime as line style (`models.facts` declarations)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
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
    median over its sampler seeds with their range shaded where it ran with several. Several
    searchers: one panel each, the reference searcher (TPE) drawn grey in every panel, so each band
    is read against the reference's alone."""
    if not lines:
        return []
    unit = lines[0].x_unit if len({ln.x_unit for ln in lines}) == 1 else TRIALS
    scale = SCALE[lines[0].mode]
    ylabel = f"best {metric} so far{' (%)' if scale == 100 else ''} ({lines[0].mode})"
    groups: dict[tuple[str, str | None], list[SearchLine]] = {}
    for line in lines:
        groups.setdefault((line.searcher, line.arm), []).append(line)
    searchers = sorted({ln.searcher for ln in lines}, key=lambda n: (n != REFERENCE_SEARCHER, n))
    panels = [n for n in searchers if n != REFERENCE_SEARCHER] if len(searchers) > 1 else searchers
    title = "Best-so-far validation score against compute spent"
    if len(panels) == 1:
        fig, ax = axes(title, X_LABELS[unit], ylabel)
        axes_of = {panels[0]: ax, REFERENCE_SEARCHER: ax}
    else:
        fig, axes_of = _panels(panels, title, X_LABELS[unit], ylabel)
    for i, ((searcher, arm), group) in enumerate(groups.items()):
        style = _style(searcher, arm, searchers, i)
        targets = [axes_of[searcher]] if searcher in axes_of and len(panels) == 1 else []
        if len(panels) > 1:
            reference = searcher == REFERENCE_SEARCHER
            targets = list(axes_of.values()) if reference else [axes_of[searcher]]
            style = {**style, "color": "0.45"} if reference else style
        for ax in targets:
            _draw(ax, group, unit, scale, style)
    for ax in {id(a): a for a in axes_of.values()}.values():
        if unit != TRIALS:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
        ax.set_xlim(left=0)
        ax.legend(fontsize=6 if len(panels) > 1 else 7, loc="lower right")
    return save(fig, out_dir, FILE_NAME)


def _panels(panels: list[str], title: str, xlabel: str, ylabel: str):
    """A grid of panels (at most 3 across) sharing both axes, one per searcher."""
    cols = min(3, len(panels))
    rows = -(-len(panels) // cols)
    fig = Figure(figsize=(3.6 * cols, 2.9 * rows + 0.6))
    fig.subplots_adjust(left=0.07, right=0.98, bottom=0.11, top=0.9, wspace=0.06, hspace=0.3)
    fig.suptitle(title + f" (grey: {REFERENCE_SEARCHER}, the reference)", fontsize=10)
    fig.supxlabel(xlabel, fontsize=8)
    fig.supylabel(ylabel, fontsize=8)
    first = None
    out = {}
    for i, name in enumerate(panels):
        ax = fig.add_subplot(rows, cols, i + 1, sharex=first, sharey=first)
        first = first or ax
        ax.set_title(name, fontsize=9)
        ax.grid(True, which="major", alpha=0.3)
        ax.tick_params(labelsize=7, labelleft=i % cols == 0)
        out[name] = ax
    return fig, out


def _draw(ax, group: list[SearchLine], unit: str, scale: float, style: dict) -> None:
    """The median over the group's seeds as a step line, their range shaded (several seeds)."""
    x = np.unique(np.concatenate([_x(ln, unit) for ln in group]))
    x = x[x <= min(_x(ln, unit)[-1] for ln in group)]  # where every seed has a value
    ys = np.array([scale * best_along(_x(ln, unit), ln.best, x) for ln in group])
    label = line_label(group[0]) + (f" (median of {len(group)} seeds)" if len(group) > 1 else "")
    with np.errstate(all="ignore"):
        middle = np.nanmedian(ys, axis=0) if len(group) > 1 else ys[0]
        low, high = np.nanmin(ys, axis=0), np.nanmax(ys, axis=0)
    if x.size == 1:  # a population (PBT, PB2): its members are scored together, at its end
        ax.errorbar(x, middle, yerr=[middle - low, high - middle], marker="D", ms=5, capsize=3, zorder=3,
                    label=label + ", scored at its end", color=style["color"], ls="none")  # fmt: skip
        return
    ax.step(x, middle, where="post", lw=1.6, label=label, **style)
    ax.plot(x, middle, ls="none", marker="o", ms=2.0, color=style["color"])
    if len(group) > 1:
        ax.fill_between(x, low, high, step="post", color=style["color"], alpha=0.15, lw=0)
