"""What every figure is drawn on: one axes of a fixed size, log axes whose tick labels stay
readable at any span, and saving as PNG + SVG without timestamps (redraws are byte-identical)."""

from __future__ import annotations

from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from matplotlib.ticker import FixedLocator, FuncFormatter, Locator, LogLocator, MaxNLocator, NullFormatter


def save(fig: Figure, out_dir: Path, name: str) -> list[Path]:
    """name.png (150 dpi) and name.svg, with no timestamps so redraws are identical."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / f"{name}.png", out_dir / f"{name}.svg"]
    with matplotlib.rc_context({"svg.hashsalt": "vitscale"}):
        # "tight": a legend placed beside the axes (many series) is kept in the image
        fig.savefig(paths[0], dpi=150, metadata={"Software": None}, bbox_inches="tight")
        fig.savefig(paths[1], metadata={"Date": None}, bbox_inches="tight")
    return paths


def short(value: float) -> str:
    """Tick label without mathtext (fast, and readable): 50000 -> '50k'."""
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g}{unit}"
    return f"{value:.3g}"


class ReadableLogLocator(Locator):
    """1-2-5 ticks per decade on an axis spanning a decade or more; on a narrower one (e.g. 0.75M-1.9M
    parameters, where 1-2-5 leaves one label and 1..9 multiples leave 1M-1.9M bare), evenly spaced
    plain values, so labels cover the whole axis."""

    def __call__(self):
        vmin, vmax = self.axis.get_view_interval()
        return self.tick_values(vmin, vmax)

    def tick_values(self, vmin: float, vmax: float):
        lo, hi = sorted((vmin, vmax))
        if lo > 0 and hi / lo < 10:
            return [t for t in MaxNLocator(5).tick_values(lo, hi) if t > 0]
        ticks = LogLocator(base=10, subs=(1.0, 2.0, 5.0)).tick_values(lo, hi)
        if sum(lo <= t <= hi for t in ticks) >= 3:
            return ticks
        return LogLocator(base=10, subs=tuple(float(s) for s in range(1, 10))).tick_values(lo, hi)


def log_axis(axis, ticks: list[float] | None = None) -> None:
    """Log axis with 1-2-5 (or the given) ticks, plain labels, no minor labels."""
    axis.set_major_locator(FixedLocator(ticks) if ticks else ReadableLogLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: short(v)))
    axis.set_minor_formatter(NullFormatter())


def footnote(fig: Figure, text: str) -> None:
    """A small grey line under the axes: what the reader must know to read the marks (clipped bars)."""
    fig.text(0.01, 0.0, text, fontsize=6, color="gray", va="top")


def axes(title: str, xlabel: str, ylabel: str, logx: bool = False, logy: bool = False):
    """A figure with one titled, gridded axes; log axes get readable plain tick labels."""
    fig = Figure(figsize=(6.4, 4.6))  # fixed margins: constrained layout would double the draw time
    fig.subplots_adjust(left=0.12, right=0.97, bottom=0.11, top=0.93)
    ax = fig.add_subplot()
    ax.set(title=title, xlabel=xlabel, ylabel=ylabel)
    if logx:
        ax.set_xscale("log")
        log_axis(ax.xaxis)
    if logy:
        ax.set_yscale("log")
        log_axis(ax.yaxis)
    ax.grid(True, which="major", alpha=0.3)
    return fig, ax
