"""How every figure draws a study: one colour per mixer (stable across studies), one marker per
regime, one line style per backend (a mixer's implementation switch) or regime, and the axis labels
of common metrics. Colours, markers and line styles are the mixers' and regimes' own declarations
(`models.facts`); those that declare none take spares, in a stable order."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from vitscale.models.registry import MIXERS, REGIMES, mixer_order, regime_order

SPARE_COLORS = ("#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
SPARE_MARKERS = ("D", "v", "P", "X")
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
    """One colour per mixer, the same in every figure and study: its declared one, else a spare by
    its place among the registered mixers without one (unregistered names: after them, by name)."""
    facts = MIXERS.facts()
    if mixer in facts and facts[mixer].color:
        return facts[mixer].color
    others = sorted(m for m, f in facts.items() if not f.color)
    rank = others.index(mixer) if mixer in others else len(others) + sum(map(ord, mixer))
    return SPARE_COLORS[rank % len(SPARE_COLORS)]


def regime_line(regime: str) -> str:
    """The line style a regime declares for its fitted curves (solid where it declares none)."""
    facts = REGIMES.facts().get(regime)
    return (facts.line if facts else None) or "-"


def backend_line(mixer: str, backend: str | None) -> str:
    """The line style of a mixer's backend value (solid for mixers without a backend switch)."""
    facts = MIXERS.facts().get(mixer)
    declared = facts.backend if facts else None
    return declared.lines.get(backend, "-") if declared is not None and backend is not None else "-"


class Style:
    """Stable colour / marker assignment for the mixers and regimes of one study."""

    def __init__(self, mixers: list, regimes: list):
        self.color = {m: mixer_color(m) for m in mixer_order([m for m in mixers if m])}
        markers = iter(SPARE_MARKERS * 4)
        declared = REGIMES.facts()
        self.marker = {
            r: (declared[r].marker if r in declared else None) or next(markers)
            for r in regime_order([r for r in regimes if r])
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
