"""Learning curves: top-1 against images seen, one figure per regime, one colour per arm in it.

Validation solid (thin lines: each seed; thick: their mean), test dashed (the mean of the runs that
logged `curve_test_top1`); the last quarter of training, the window of the convergence rule, is
shaded, and each arm's legend entry carries its mark. Without a test curve (older runs) the figure
says it shows validation only.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgb
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter

from vitscale.analysis.figures.canvas import axes, footnote, save, short
from vitscale.analysis.figures.style import mixer_color
from vitscale.analysis.statistics.convergence import LAST_SHARE, UNDETERMINED
from vitscale.analysis.statistics.learning_curves import IMAGES, ArmCurve
from vitscale.tracking.layout import NAME_SEP

PANEL_KEY = "model.regime"  # one figure per value of this arm key (all arms in one without it)
COLOR_KEY = "model.mixer"  # a line's colour: its mixer's (shades of it for several lines of one mixer)
MIN_SHADE = 0.4  # the lightest shade: 40 % of the mixer's colour on white
X_LABELS = {IMAGES: "images seen (training images, cumulative)", "epochs": "epoch (images_seen not logged)"}


def _panels(curves: list[ArmCurve]) -> dict[str, list[ArmCurve]]:
    out: dict[str, list[ArmCurve]] = {}
    for c in curves:
        if c.runs:
            out.setdefault(c.key.get(PANEL_KEY, ""), []).append(c)
    return out


def _line_label(c: ArmCurve) -> str:
    values = [v for k, v in c.key.items() if k != PANEL_KEY]
    return NAME_SEP.join(values) or c.label


def _colors(curves: list[ArmCurve]) -> list[tuple]:
    """Each line's colour: its mixer's, and where a mixer has several lines in the figure (widths,
    settings) shades of it from light to full in the arms' order; without mixers, tab20's."""
    mixers = [c.key.get(COLOR_KEY) for c in curves]
    if None in mixers:
        return [colormaps["tab20"](i % 20) for i in range(len(curves))]
    out = []
    for i, mixer in enumerate(mixers):
        same = [j for j, m in enumerate(mixers) if m == mixer]
        shade = 1.0 if len(same) == 1 else MIN_SHADE + (1 - MIN_SHADE) * same.index(i) / (len(same) - 1)
        out.append(tuple(shade * np.array(to_rgb(mixer_color(mixer))) + (1 - shade)))
    return out


def _file_name(panel: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "_", panel).strip("_")
    return f"learning_curves_{slug}" if slug else "learning_curves"


def learning_curve_figure(panel: str, curves: list[ArmCurve], out_dir: Path) -> list[Path]:
    """The figure of one regime's arms (`panel`: the regime, '' for all arms): PNG and SVG."""
    unit = IMAGES if all(c.x_unit == IMAGES for c in curves) else "epochs"
    seeds = sorted({len(c.runs) for c in curves})
    n = f"n={seeds[0]}" if len(seeds) == 1 else f"n={seeds[0]}–{seeds[-1]}"
    title = f"Learning curves{f' · {panel}' if panel else ''} (mean over {n} seeds per arm)"
    fig, ax = axes(title, X_LABELS[unit], "top-1 accuracy (%)")
    handles = []
    end = 0.0
    for c, color in zip(curves, _colors(curves), strict=True):
        x = c.x if unit == c.x_unit else c.epoch.astype(float)
        for run in c.runs:
            rx = c.run_x(run) if unit == c.x_unit else run.epoch.astype(float)
            ok = np.isfinite(rx) & np.isfinite(run.val)
            ax.plot(rx[ok], 100 * run.val[ok], color=color, lw=0.7, alpha=0.3)
        ok = np.isfinite(x) & np.isfinite(c.val)
        m = c.convergence
        gain = f"{100 * m.gain:+.2f} points in the last {LAST_SHARE:.0%}"
        mark = f"{m.mark} ({m.reason if m.mark == UNDETERMINED else gain})"
        (line,) = ax.plot(
            x[ok], 100 * c.val[ok], color=color, lw=2.0, marker="o", ms=3, label=f"{_line_label(c)}: {mark}"
        )
        handles.append(line)
        ok = np.isfinite(x) & np.isfinite(c.test)
        if ok.any():
            ax.plot(x[ok], 100 * c.test[ok], color=color, lw=1.6, ls="--")
        end = max(end, float(np.nanmax(x)) if np.isfinite(x).any() else 0.0)
    if end > 0:
        ax.axvspan((1 - LAST_SHARE) * end, end, color="0.5", alpha=0.1, lw=0)
    handles += [
        Line2D([], [], color="0.3", lw=2.0, label="validation (mean; thin: each seed)"),
        Line2D([], [], color="0.3", lw=1.6, ls="--", label="test (mean)"),
        Patch(color="0.5", alpha=0.1, lw=0, label=f"last {LAST_SHARE:.0%} of training (convergence window)"),
    ]
    if not any(c.has_test for c in curves):
        handles.pop(-2)
        footnote(fig, "No test curve: these runs logged no curve_test_top1 (older runs); validation only.")
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0)
    if unit == IMAGES:
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    ax.set_xlim(0, 1.03 * end if end > 0 else None)
    return save(fig, out_dir, _file_name(panel))


def learning_curve_figures(curves: list[ArmCurve], out_dir: Path) -> list[Path]:
    """One figure per regime (value of PANEL_KEY), in the arms' order of first appearance."""
    return [
        p for panel, group in _panels(curves).items() for p in learning_curve_figure(panel, group, out_dir)
    ]
