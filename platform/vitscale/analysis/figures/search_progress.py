"""Best-so-far against compute spent: one step line per searcher (and arm), its mixer's colour and
its regime's line style where the arm names them (`models.facts` declarations), else tab10's."""

from __future__ import annotations

from pathlib import Path

from matplotlib import colormaps
from matplotlib.ticker import FuncFormatter

from vitscale.analysis.figures.canvas import axes, save, short
from vitscale.analysis.figures.style import mixer_color, regime_line
from vitscale.analysis.statistics.search_progress import TRIALS, SearchLine
from vitscale.tracking.layout import arm_display, parse_arm

FILE_NAME = "search_progress"
X_LABELS = {
    "train_flops": "training FLOPs spent by the search (cumulative, trials in start order)",
    "images_seen": "training images seen by the search (cumulative; no train_flops logged)",
    TRIALS: "trials run (no train_flops or images_seen logged)",
}
SCALE = {"max": 100.0, "min": 1.0}  # a maximised score is an accuracy fraction: shown in %


def line_label(line: SearchLine) -> str:
    return f"{line.searcher} · {arm_display(line.arm)}" if line.arm else line.searcher


def _style(line: SearchLine, index: int) -> dict:
    key = parse_arm(line.arm) if line.arm else {}
    mixer, regime = key.get("model.mixer"), key.get("model.regime")
    color = mixer_color(mixer) if mixer else colormaps["tab10"](index % 10)
    return {"color": color, "ls": regime_line(regime) if regime else "-"}


def search_progress_figure(lines: list[SearchLine], metric: str, out_dir: Path) -> list[Path]:
    """The figure (PNG and SVG), or nothing without lines."""
    if not lines:
        return []
    unit = lines[0].x_unit if len({ln.x_unit for ln in lines}) == 1 else TRIALS
    mode = lines[0].mode
    scale = SCALE[mode]
    ylabel = f"best {metric} so far{' (%)' if scale == 100 else ''} ({mode})"
    fig, ax = axes("Best-so-far validation score against compute spent", X_LABELS[unit], ylabel)
    for i, line in enumerate(lines):
        x = line.x if unit == line.x_unit else (line.x * 0 + 1).cumsum()
        ax.step(x, scale * line.best, where="post", lw=1.8, label=line_label(line), **_style(line, i))
        ax.plot(x, scale * line.best, ls="none", marker="o", ms=2.5, color=_style(line, i)["color"])
    if unit != TRIALS:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    ax.set_xlim(left=0)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    return save(fig, out_dir, FILE_NAME)
