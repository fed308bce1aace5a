"""How every figure draws a study: one colour per mixer (stable across studies), one marker per
regime, one line style per attention backend or regime, and the axis labels of common metrics."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from vitscale.models.registry import MIXERS, mixer_order, regime_order

MIXER_COLORS = {"attention": "#1f77b4", "ssog": "#d62728"}
SPARE_COLORS = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
REGIME_MARKERS = {"discrete": "o", "looped": "s", "ode": "^"}
SPARE_MARKERS = ("D", "v", "P", "X")
BACKEND_STYLES = {"sdpa": "-", "math": "--"}
REGIME_STYLES = {"discrete": "-", "looped": "--", "ode": ":"}
LABELS = {
    "params": "parameters (count)",
    "flops_per_image": "FLOPs per image (forward)",
    "nfe_mean": "function evaluations per forward (NFE)",
    "val_top1": "validation top-1 accuracy (%)",
    "images_per_second": "throughput (images/s)",
    "peak_memory_mb": "peak memory (MB)",
    "resolution": "input resolution (pixels per side)",
}


def mixer_color(mixer: str) -> str:
    """One colour per mixer, the same in every figure and study: fixed for attention and SSoG, the
    rest by the mixer's place among the registered ones (unregistered names: after them, by name)."""
    if mixer in MIXER_COLORS:
        return MIXER_COLORS[mixer]
    others = sorted(m for m in MIXERS if m not in MIXER_COLORS)
    rank = others.index(mixer) if mixer in others else len(others) + sum(map(ord, mixer))
    return SPARE_COLORS[rank % len(SPARE_COLORS)]


class Style:
    """Stable colour / marker assignment for the mixers and regimes of one study."""

    def __init__(self, mixers: list, regimes: list):
        self.color = {m: mixer_color(m) for m in mixer_order([m for m in mixers if m])}
        markers = iter(SPARE_MARKERS * 4)
        self.marker = {
            r: REGIME_MARKERS.get(r) or next(markers) for r in regime_order([r for r in regimes if r])
        }

    def of(self, mixer, regime) -> dict:
        return {"color": self.color.get(mixer, "gray"), "marker": self.marker.get(regime, "x")}


def style_for(table: pa.Table) -> Style:
    return Style(table.column("mixer").to_pylist(), table.column("regime").to_pylist())


CLIPPED_NOTE = "error bars: 95 % t-interval over seeds, cut where it passes 0 or 100 %"


def bounded(ys: np.ndarray, half: np.ndarray, low: float, high: float) -> np.ndarray:
    """(2, n) error bars cut at the quantity's range: a t-interval from 3 seeds can reach past 100 %
    accuracy, which no run can; the bar stops at the bound instead of drawing the impossible (and
    the figure says so: `clipped`, CLIPPED_NOTE)."""
    return np.vstack([np.minimum(half, np.maximum(ys - low, 0)), np.minimum(half, np.maximum(high - ys, 0))])


def clipped(ys: np.ndarray, half: np.ndarray, low: float, high: float) -> bool:
    """Whether `bounded` cuts any of these bars."""
    ok = np.isfinite(ys) & np.isfinite(half)
    return bool(np.any((ys[ok] - half[ok] < low) | (ys[ok] + half[ok] > high)))


def legend(ax, beside: bool = False) -> None:
    """Beside the axes when there are many series (a mixer x regime zoo) or when asked (the axes
    carry text the legend must not cover), else inside."""
    many = beside or len(ax.get_legend_handles_labels()[0]) > 8
    kw = (
        {"loc": "upper left", "bbox_to_anchor": (1.01, 1.0), "borderaxespad": 0.0}
        if many
        else {"loc": "best"}
    )
    ax.legend(fontsize=7 if many else 8, **kw)
