"""One figure per varying axis (analysis.statistics.axes): test error against the axis, one line per mixer ×
regime × fixed setting, its fitted trend where one was fitted; for an axis with a cost (solver
tolerance) a second panel below, sharing x, with the NFE each level cost, so the accuracy–cost trade
reads off one column.

Colour per mixer and marker per regime as in every figure; line style tells curves of one mixer ×
regime apart (another width, another atol). Error bars are 95 % t-intervals over seeds, clipped to
[0, 100] % error (NFE: at 0), which a footnote on the figure says. Curves are nudged apart along x
(a few per cent, log axis) so their bars do not hide each other; ticks sit at the levels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from vitscale.analysis.figures.canvas import log_axis, save
from vitscale.analysis.figures.style import LABELS, Style, bounded, legend
from vitscale.analysis.statistics.axes import LOG_UNITS, MIN_TREND_LEVELS, AxisCurve, AxisStudy

STROKES = ("-", "--", ":", "-.")
NUDGE = 1.03  # x factor between neighbouring curves on a log axis, at most
NUDGE_SHARE = 0.3  # all curves together span at most this share of the narrowest gap between levels
MAX_TICKS = 9  # more levels than this: the readable log locator instead of a tick per level
FOOTNOTE = "bars: 95 % t-interval over seeds, clipped to [0, 100] % error"
POLICY_NOTES = {
    "drop": "runs without a final number dropped",
    "chance": "runs without a final number at chance",
}


def figure_name(study: AxisStudy) -> str:
    return f"error_vs_{study.axis.name}"


def trend_text(curve: AxisCurve) -> str:
    """'b = 0.61 [0.52, 0.70]', '+1.2 pts/decade [...]', or why there is no trend."""
    t = curve.trend
    if t.status != "ok":
        return t.reason or t.status
    if t.fit is not None:  # a power law carries its whole fit, as AxisTrend.predict reads it
        text = f"b = {t.estimate:.2f}"
        return text + (f" [{t.ci[0]:.2f}, {t.ci[1]:.2f}]" if t.ci else "")
    text = f"{100 * t.estimate:+.2f} pts/{LOG_UNITS[t.base]}"
    return text + (f" [{100 * t.ci[0]:+.2f}, {100 * t.ci[1]:+.2f}]" if t.ci else "")


def _strokes(curves: list[AxisCurve]) -> list[str]:
    seen: dict[tuple, int] = {}
    out = []
    for c in curves:
        k = seen.get((c.mixer, c.regime), 0)
        seen[(c.mixer, c.regime)] = k + 1
        out.append(STROKES[k % len(STROKES)])
    return out


def _nudges(n: int, levels: list[float]) -> np.ndarray:
    """x factors that set n curves apart, narrower than the closest two levels."""
    if n < 2:
        return np.ones(n)
    gap = min(np.log(b / a) for a, b in zip(levels, levels[1:], strict=False)) if len(levels) > 1 else 1.0
    step = min(np.log(NUDGE), NUDGE_SHARE * gap / (n - 1))
    return np.exp(step * (np.arange(n) - (n - 1) / 2))


def _x_axis(ax, levels: list[float]) -> None:
    ax.set_xscale("log")
    log_axis(ax.xaxis, levels if len(levels) <= MAX_TICKS else None)


def axis_figure(study: AxisStudy, out_dir: Path) -> list[Path]:
    """error_vs_<axis>.png/.svg: error (%) per level and curve, trends, and NFE below where measured."""
    curves = study.curves
    if not curves:
        return []
    with_cost = any(level.cost is not None for c in curves for level in c.levels)
    fig = Figure(figsize=(6.4, 6.8 if with_cost else 4.6))
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.1, top=0.94, hspace=0.08)
    ax = fig.add_subplot(2, 1, 1) if with_cost else fig.add_subplot()
    ax.set(title=study.axis.title, ylabel="test top-1 error (%)")
    cost_ax = fig.add_subplot(2, 1, 2, sharex=ax) if with_cost else None
    style = Style([c.mixer for c in curves], [c.regime for c in curves])
    levels = sorted({level.x for c in curves for level in c.levels})
    nudges = _nudges(len(curves), levels)
    for curve, stroke, nudge in zip(curves, _strokes(curves), nudges, strict=True):
        look = style.of(curve.mixer, curve.regime)
        x = np.array([level.x for level in curve.levels]) * nudge
        y = np.array([100 * level.error[0] for level in curve.levels])
        half = np.nan_to_num(np.array([100 * level.error[1] for level in curve.levels]))
        ax.errorbar(
            x,
            y,
            yerr=bounded(y, half, 0.0, 100.0),
            ls=stroke,
            lw=1.2,
            ms=5,
            capsize=3,
            label=curve.label + (f": {trend_text(curve)}" if curve.trend.status == "ok" else ""),
            **look,
        )
        if curve.trend.status == "ok":
            grid = np.geomspace(min(levels), max(levels), 100)
            ax.plot(grid, 100 * curve.trend.predict(grid), color=look["color"], lw=0.8, alpha=0.6, ls=stroke)
        if cost_ax is not None:
            _cost(cost_ax, curve, x, stroke, look)
    for a in (ax, cost_ax):
        if a is not None:
            _x_axis(a, levels)
            a.grid(True, which="major", alpha=0.3)
    xlabel = study.axis.x_label([c.x_param for c in curves])
    if cost_ax is not None:
        metric = next((c.cost_metric for c in curves if c.cost_metric), "nfe")
        cost_ax.set(xlabel=xlabel, ylabel=f"{LABELS['nfe_mean'].split(' (')[0]}\n({metric})")
        ax.tick_params(labelbottom=False)
    else:
        ax.set(xlabel=xlabel)
    legend(ax, beside=len(curves) > 3)
    notes = [FOOTNOTE + (", NFE at 0" if with_cost else ""), POLICY_NOTES[study.policy]]
    if any(c.trend.status == "not_fitted" for c in curves):
        notes.append(f"unlabelled lines: no trend (fewer than {MIN_TREND_LEVELS} levels)")
    fig.text(0.01, 0.0, "; ".join(notes), fontsize=6, color="gray", va="top")
    return save(fig, out_dir, figure_name(study))


def _cost(ax, curve: AxisCurve, x: np.ndarray, stroke: str, look: dict) -> None:
    cost = [level.cost or (np.nan, np.nan, 0) for level in curve.levels]
    y = np.array([c[0] for c in cost], dtype=float)
    half = np.nan_to_num(np.array([c[1] for c in cost], dtype=float))
    ax.errorbar(x, y, yerr=bounded(y, half, 0.0, np.inf), ls=stroke, lw=1.2, ms=5, capsize=3, **look)
