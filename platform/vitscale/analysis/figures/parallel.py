"""Parallel coordinates: one line per run across its parameters, coloured by the objective.

Each axis is scaled to [0, 1] (a numeric one spanning more than 20× in log10) and labelled in its
own values beside its vertical line: every category of a categorical axis at its position, a numeric
axis at its ends and, with few values, at each of them. The colour bar gives the objective's scale,
and the objective is the last axis. Without the labels a categorical axis read 0 / 0.5 / 1.
"""

from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from vitscale.analysis.figures.canvas import axes, short

LOG_SPAN = 20  # a positive numeric axis spanning more than this factor is drawn in log10
MAX_LABELS = 8  # a categorical axis with more categories labels every k-th; numeric ones: ends only
LABEL_BOX = {"facecolor": "white", "alpha": 0.75, "edgecolor": "none", "pad": 0.4}  # over the lines
LABEL_CHARS = 22  # longer category names are cut (with …)


def _numeric(raw: list) -> bool:
    return all(isinstance(v, int | float) and not isinstance(v, bool) for v in raw if v is not None)


def _label(value) -> str:
    text = (
        short(float(value)) if isinstance(value, int | float) and not isinstance(value, bool) else str(value)
    )
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def scaled_axis(raw: list) -> tuple[np.ndarray, list[tuple[float, str]]]:
    """(positions in [0, 1], [(position, tick label)]) of one axis's values."""
    if _numeric(raw):
        nums = np.array([np.nan if v is None else float(v) for v in raw])
        log = np.nanmin(nums) > 0 and np.nanmax(nums) / np.nanmin(nums) > LOG_SPAN
        shown = np.log10(nums) if log else nums
        lo, hi = np.nanmin(shown), np.nanmax(shown)
        pos = (shown - lo) / (hi - lo) if hi > lo else np.full(len(nums), 0.5)
        distinct = sorted({float(v) for v in nums if np.isfinite(v)})
        picked = distinct if len(distinct) <= MAX_LABELS // 2 else [distinct[0], distinct[-1]]
        ticks = [(float(pos[np.nanargmin(np.abs(nums - v))]), _label(v)) for v in picked]
        return pos, ticks
    cats = sorted({str(v) for v in raw}, key=str)
    where = {c: i / max(len(cats) - 1, 1) if len(cats) > 1 else 0.5 for i, c in enumerate(cats)}
    step = max(1, -(-len(cats) // MAX_LABELS))
    ticks = [(where[c], _label(c)) for i, c in enumerate(cats) if i % step == 0 or i == len(cats) - 1]
    return np.array([where[str(v)] for v in raw]), ticks


def parallel_coordinates(columns: dict[str, list], values: list[float], metric: str) -> Figure:
    """The figure: `columns` maps an axis name to one value per run, `values` the runs' objective."""
    names = list(columns)
    scaled = [scaled_axis(columns[n]) for n in names]
    objective = np.asarray(values, dtype=float)
    lo, hi = float(objective.min()), float(objective.max())
    norm = Normalize(vmin=lo, vmax=hi if hi > lo else lo + 1e-12)
    shade = (objective - lo) / (hi - lo) if hi > lo else np.full(objective.size, 0.5)
    fig, ax = axes(f"Parallel coordinates, coloured by {metric}", "", "")
    cmap = colormaps["viridis"]
    xs = np.arange(len(names) + 1)
    for i in np.argsort(shade):
        ax.plot(
            xs, [pos[i] for pos, _ in scaled] + [shade[i]], color=cmap(norm(objective[i])), alpha=0.7, lw=1
        )
    objective_ticks = [(0.0, _label(lo)), (1.0, _label(hi))] if hi > lo else [(0.5, _label(lo))]
    for x, (_, ticks) in zip(xs, [*scaled, (None, objective_ticks)], strict=True):
        ax.axvline(x, color="0.6", lw=0.8, zorder=0)
        for y, text in ticks:
            ax.text(
                x, y, f" {text}", fontsize=6, va="center", ha="left", clip_on=False, zorder=5, bbox=LABEL_BOX
            )
    ax.set_xticks(xs, [*names, metric], rotation=20, ha="right")
    ax.set_yticks([])
    ax.set_ylim(-0.05, 1.05)
    ax.grid(False)
    fig.colorbar(ScalarMappable(norm=norm, cmap=cmap), ax=ax, label=metric, pad=0.02)
    return fig
