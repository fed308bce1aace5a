"""The two figures of accuracy at resolution (analysis.statistics.resolution): test top-1 against the
evaluation side per arm, and the accuracy–throughput front over resolutions.

Colour per mixer and marker per regime as in every figure; line style per training resolutions
(solid: the first arm's, dashed, dotted...: the others), so "trained at 28" and "trained across
28-56" of one mixer × regime read as one colour and marker with two strokes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vitscale.analysis.figures.canvas import axes, footnote, log_axis, save
from vitscale.analysis.figures.style import CLIPPED_NOTE, LABELS, Style, bounded, clipped, legend
from vitscale.analysis.statistics.resolution import ResolutionPoint

TRAINED_STYLES = ("-", "--", ":", "-.")


def _styles(points: list[ResolutionPoint]) -> tuple[Style, dict[str, str]]:
    style = Style([p.mixer for p in points], [p.regime for p in points])
    trained = list(dict.fromkeys(p.trained for p in points))
    return style, {t: TRAINED_STYLES[i % len(TRAINED_STYLES)] for i, t in enumerate(trained)}


def _by_arm(points: list[ResolutionPoint]) -> dict[str, list[ResolutionPoint]]:
    out: dict[str, list[ResolutionPoint]] = {}
    for p in points:
        out.setdefault(p.arm, []).append(p)
    return {a: sorted(ps, key=lambda p: p.resolution) for a, ps in out.items()}


def _label(p: ResolutionPoint) -> str:
    return f"{p.mixer} · {p.regime} · trained {p.trained} px"


def accuracy_vs_resolution_figure(points: list[ResolutionPoint], out_dir: Path, title: str) -> list[Path]:
    """Test top-1 (%) with its 95 % CI over seeds at each evaluated side, one line per arm (arms
    nudged apart along x so their error bars do not hide each other)."""
    style, strokes = _styles(points)
    fig, ax = axes(title, "evaluation resolution (pixels per side; patch fixed)", "test top-1 accuracy (%)")
    arms = _by_arm(points)
    sides = sorted({p.resolution for p in points})
    step = 0.012 * (sides[-1] - sides[0] or sides[0])
    cut = False
    for k, ps in enumerate(arms.values()):
        nudge = (k - (len(arms) - 1) / 2) * step
        x = np.array([p.resolution for p in ps], dtype=float) + nudge
        y = np.array([100 * p.test[0] for p in ps])
        half = np.nan_to_num(np.array([100 * p.test[1] for p in ps]))
        cut |= clipped(y, half, 0.0, 100.0)
        ax.errorbar(
            x,
            y,
            yerr=bounded(y, half, 0.0, 100.0),
            ls=strokes[ps[0].trained],
            ms=5,
            capsize=3,
            lw=1.2,
            label=_label(ps[0]),
            **style.of(ps[0].mixer, ps[0].regime),
        )
    ax.set_xticks(sides)
    legend(ax, beside=True)
    if cut:
        footnote(fig, CLIPPED_NOTE)
    return save(fig, out_dir, "accuracy_vs_resolution")


def accuracy_throughput_figure(points: list[ResolutionPoint], out_dir: Path, title: str) -> list[Path]:
    """Each (arm, resolution) at its measured inference images/s and test top-1; an arm's points
    joined thinly in resolution order; the Pareto front as a black step line with rings."""
    placed = [p for p in points if p.throughput is not None]
    style, strokes = _styles(placed)
    fig, ax = axes(title, LABELS["images_per_second"] + ", inference", "test top-1 accuracy (%)", logx=True)
    for ps in _by_arm(placed).values():
        x = np.array([p.throughput for p in ps])
        y = np.array([100 * p.test[0] for p in ps])
        ax.plot(
            x,
            y,
            ls=strokes[ps[0].trained],
            lw=0.9,
            ms=5,
            alpha=0.85,
            label=_label(ps[0]),
            **style.of(ps[0].mixer, ps[0].regime),
        )
        for p, xi, yi in zip(ps, x, y, strict=True):
            ax.annotate(f"{p.resolution}", (xi, yi), xytext=(3, 3), textcoords="offset points", fontsize=6)
    front = sorted((p for p in placed if p.on_front), key=lambda p: p.throughput)
    if front:
        fx = np.array([p.throughput for p in front])
        fy = np.array([100 * p.test[0] for p in front])
        ax.step(fx, fy, where="pre", color="black", lw=1.2, alpha=0.7, zorder=1, label="Pareto front")
        ax.scatter(fx, fy, s=140, facecolors="none", edgecolors="black", lw=1.2, zorder=4)
    log_axis(ax.xaxis)
    legend(ax, beside=True)
    return save(fig, out_dir, "accuracy_throughput_resolution")
