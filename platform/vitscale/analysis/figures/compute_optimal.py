"""The three compute-optimal figures (analysis.statistics.compute_optimal): test error against training FLOPs
with the envelopes and fitted frontiers, the isoFLOP curves, and N*(C).

Colour per mixer and marker per regime as in every figure. Anything beyond the measured N, D or C
range is dashed and the legend names it "extrapolation". Each figure is drawn only from groups with
>= 2 sizes (a frontier from one size says nothing about size).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from matplotlib.colors import to_rgb
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from vitscale.analysis.figures.canvas import ReadableLogLocator, axes, log_axis, save
from vitscale.analysis.figures.style import Style, legend
from vitscale.analysis.statistics.compute_optimal import ComputeGroup, ComputeOptimal

C_LABEL = "training compute (FLOPs, forward + backward)"
ERR_LABEL = "test top-1 error (%)"
EXTRAPOLATION = "extrapolation (beyond measured N, D or C)"


def flops_label(value: float) -> str:
    """2e12 -> '2e12', 3.2e12 -> '3.2e12' (FLOPs span many decades; SI prefixes run out; two
    digits, so the budgets between measured ones, 3.2e12 .. 6.4e12 in tenths, read apart)."""
    mantissa, exponent = f"{value:.1e}".split("e")
    return f"{mantissa.removesuffix('.0')}e{int(exponent)}"


def flops_axis(axis) -> None:
    """Decade ticks where the axis spans >= 3 decades (1-2-5 would crowd it), else 1-2-5."""
    lo, hi = sorted(axis.get_view_interval())
    if lo > 0 and hi / lo >= 1e3:
        axis.set_major_locator(LogLocator(base=10, subs=(1.0,)))
    else:
        axis.set_major_locator(ReadableLogLocator())
    axis.set_major_formatter(FuncFormatter(lambda v, _: flops_label(v)))
    axis.set_minor_formatter(NullFormatter())


def _style(groups: list[ComputeGroup]) -> Style:
    return Style([g.mixer for g in groups], [g.regime for g in groups])


def _drawn(result: ComputeOptimal) -> list[ComputeGroup]:
    return [g for g in result.analysed if g.n_sizes >= 2]


def _runs(segments: np.ndarray) -> list[tuple[int, int, bool]]:
    """(start, stop, flag) of each run of equal flags, overlapping by one point so lines join."""
    cuts = [0, *(np.flatnonzero(segments[1:] != segments[:-1]) + 1), segments.size]
    return [(max(a - 1, 0), b, bool(segments[a])) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]


def frontier_figure(result: ComputeOptimal, out_dir: Path) -> list[Path]:
    """Every run faint, each group's measured envelope (steps) and fitted frontier (dashed beyond
    the measured range)."""
    groups = _drawn(result)
    style = _style(groups)
    fig, ax = axes("Compute-optimal frontier", C_LABEL, ERR_LABEL, logx=True, logy=True)
    for g in groups:
        st = style.of(g.mixer, g.regime)
        ax.scatter(
            g.points.c, 100 * g.points.err, s=10, alpha=0.25, color=st["color"], marker=st["marker"], lw=0
        )
        c, e = np.asarray(g.envelope["c"]), 100 * np.asarray(g.envelope["error"])
        c, e = np.r_[c, g.points.c.max()], np.r_[e, e[-1]]
        ax.step(c, e, where="post", lw=1.0, alpha=0.8, label=f"{g.label}: measured envelope", **st, ms=4)
        if g.frontier:
            b, fe = np.asarray(g.frontier["budgets"]), 100 * np.asarray(g.frontier["error"])
            for lo, hi, out in _runs(np.asarray(g.frontier["extrapolated"])):
                ax.plot(b[lo:hi], fe[lo:hi], color=st["color"], lw=1.8, ls="--" if out else "-", alpha=0.9)
            ax.plot([], [], color=st["color"], lw=1.8, label=f"{g.label}: fitted frontier (law)")
    ax.plot([], [], color="gray", lw=1.8, ls="--", label=EXTRAPOLATION)
    flops_axis(ax.xaxis)
    legend(ax, beside=True)
    return save(fig, out_dir, "compute_frontier")


def _shade(color: str, k: int, n: int) -> tuple[float, float, float]:
    """Light (small budget) to full colour (large budget)."""
    t = 0.35 + 0.65 * (k / max(n - 1, 1))
    return tuple(1 - t * (1 - v) for v in to_rgb(color))


def isoflop_figure(result: ComputeOptimal, out_dir: Path) -> list[Path]:
    """Per group a panel: test error against N at each budget (darker: more compute), the minimum of
    each curve marked (filled: interior, used for N*; ring: at the edge of the sizes, not used)."""
    groups = [g for g in _drawn(result) if g.isoflop and any(len(m.sizes) >= 3 for m in g.isoflop.minima)]
    cols = min(3, len(groups))
    rows = math.ceil(len(groups) / cols)
    height = 3.6 * rows + 0.9
    fig = Figure(figsize=(4.6 * cols, height))
    top = 1 - 0.9 / height  # room for the figure's title above the panels' own
    fig.subplots_adjust(
        left=0.16 if cols == 1 else 0.1, right=0.95, bottom=0.12, top=top, wspace=0.3, hspace=0.45
    )
    fig.suptitle("isoFLOP curves: test error vs parameters at fixed training compute")
    style = _style(groups)
    for i, g in enumerate(groups):
        ax = fig.add_subplot(rows, cols, i + 1)
        ax.set(title=g.label, xlabel="parameters (count)", ylabel=ERR_LABEL, xscale="log", yscale="log")
        log_axis(ax.xaxis)
        log_axis(ax.yaxis)
        ax.grid(True, which="major", alpha=0.3)
        st, minima = style.of(g.mixer, g.regime), [m for m in g.isoflop.minima if len(m.sizes) >= 2]
        for k, m in enumerate(minima):
            color = _shade(st["color"], k, len(minima))
            ax.plot(
                m.sizes,
                100 * np.asarray(m.errors),
                color=color,
                marker=st["marker"],
                ms=3,
                lw=1,
                label=f"C = {m.budget:.2g}",
            )
            ax.annotate(
                flops_label(m.budget),
                (m.sizes[-1], 100 * m.errors[-1]),
                xytext=(8, 0),
                textcoords="offset points",
                fontsize=6,
                color=color,
                va="center",
            )
            if m.parabola:
                c2, c1, c0, lo, hi = m.parabola
                ln = np.linspace(lo, hi, 30)
                ax.plot(np.exp(ln), 100 * np.exp(np.polyval([c2, c1, c0], ln)), color="black", lw=0.7, ls=":")
            face = "black" if not m.edge else "none"
            ax.scatter(
                [m.n_opt],
                [100 * m.err_opt],
                marker="*",
                s=90,
                facecolors=face,
                edgecolors="black",
                lw=0.8,
                zorder=4,
            )
    handles = [
        Line2D([], [], marker="*", ls="none", color="black", ms=9, label="minimum (interior: used for N*)"),
        Line2D(
            [],
            [],
            marker="*",
            ls="none",
            mfc="none",
            mec="black",
            ms=9,
            label="minimum at the edge (not used)",
        ),
        Line2D([], [], color="black", lw=0.7, ls=":", label="parabola in log N through the points near it"),
        Line2D([], [], color="gray", lw=1, label="one curve per budget C in FLOPs (darker: more C)"),
    ]
    fig.legend(handles=handles, loc="upper center", fontsize=7, ncol=2, bbox_to_anchor=(0.5, 0.0))
    return save(fig, out_dir, "isoflop_curves")


def optimal_size_figure(result: ComputeOptimal, out_dir: Path) -> list[Path]:
    """N*(C) from the isoFLOP minima (filled: interior; hollow: edge, not used) and the fitted C^a."""
    groups = [g for g in _drawn(result) if g.isoflop and g.isoflop.n_interior >= 2]
    style = _style(groups)
    fig, ax = axes(
        "Compute-optimal model size N*(C)", C_LABEL, "compute-optimal parameters N*", logx=True, logy=True
    )
    for g in groups:
        st, iso = style.of(g.mixer, g.regime), g.isoflop
        pts = [m for m in iso.minima if m.n_opt is not None]
        inner = [m for m in pts if not m.edge]
        edge = [m for m in pts if m.edge]
        ax.plot(
            [m.budget for m in inner],
            [m.n_opt for m in inner],
            ls="none",
            ms=6,
            label=f"{g.label}: isoFLOP minima",
            **st,
        )
        if edge:
            ax.plot(
                [m.budget for m in edge],
                [m.n_opt for m in edge],
                ls="none",
                ms=6,
                mfc="none",
                mec=st["color"],
                marker=st["marker"],
            )
        if iso.a is not None:
            b = np.geomspace(min(m.budget for m in inner), max(m.budget for m in inner), 50)
            ci = f" [{iso.ci[0]:.2f}, {iso.ci[1]:.2f}]" if iso.ci else ""
            ax.plot(
                b,
                np.exp(iso.intercept) * b**iso.a,
                color=st["color"],
                lw=1.2,
                label=f"{g.label}: N* ∝ C^{iso.a:.2f}{ci}",
            )
    ax.plot(
        [],
        [],
        ls="none",
        marker="o",
        mfc="none",
        mec="gray",
        label="minimum at the edge of the sizes (not used)",
    )
    flops_axis(ax.xaxis)
    legend(ax, beside=True)
    return save(fig, out_dir, "optimal_size")


def compute_figures(result: ComputeOptimal | None, out_dir: Path) -> list[Path]:
    """The figures the data can carry (none from groups of one size)."""
    if result is None or not _drawn(result):
        return []
    paths = frontier_figure(result, out_dir)
    drawn = _drawn(result)
    if any(g.isoflop and any(len(m.sizes) >= 3 for m in g.isoflop.minima) for g in drawn):
        paths += isoflop_figure(result, out_dir)
    if any(g.isoflop and g.isoflop.n_interior >= 2 for g in drawn):
        paths += optimal_size_figure(result, out_dir)
    return paths
