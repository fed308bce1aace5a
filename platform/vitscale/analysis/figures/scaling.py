"""Publication figures, headless: matplotlib's object API (no pyplot state, no display needed).

Conventions across every figure: one colour per mixer, one marker per regime, line style per
backend (a mixer's implementation switch); error bars are the 95 % CI over seeds (cut at 0 and 100 % accuracy, which a
footnote then says); a figure whose x axis takes one value is not drawn; the Pareto front is a black step line
with hollow rings on its points; fitted curves are drawn over the points. PNG and SVG each.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vitscale.analysis.figures.canvas import axes, footnote, log_axis, save
from vitscale.analysis.figures.style import (
    CLIPPED_NOTE,
    LABELS,
    Style,
    backend_line,
    bounded,
    clipped,
    legend,
    regime_line,
    style_for,
)
from vitscale.analysis.load.fields import as_float
from vitscale.analysis.statistics.fits import PowerLawFit
from vitscale.analysis.statistics.fronts import Front, nfe_rows
from vitscale.analysis.statistics.varies import varies, varies_within
from vitscale.models.registry import mixer_order, regime_order


def _ci(col: np.ndarray, scale: float = 1.0) -> np.ndarray:
    return np.nan_to_num(col * scale, nan=0.0)


def accuracy_figure(
    agg: pa.Table, x: str, front: Front | None, out_dir: Path, name: str, title: str, logx: bool = True
) -> list[Path]:
    """Mean top-1 (%) with seed CIs against a cost; the front as a step line. Not drawn when the
    cost takes one value (every configuration that counts NFE at the same NFE: one column of points)."""
    rows = agg.filter(pc.greater(agg.column("n_used"), 0))
    if x == "nfe_mean":
        rows = nfe_rows(rows)
    if not varies(rows, f"{x}_mean"):
        return []
    style = style_for(agg)
    fig, ax = axes(title, LABELS.get(x, x), LABELS["val_top1"], logx=logx)
    clipped = _points(
        ax, rows, f"{x}_mean", "val_top1_mean", "val_top1_ci95", style, scale=100.0, bounds=(0.0, 100.0)
    )
    if front is not None and front.table.num_rows:
        fx, fy = (
            as_float(front.table.column(f"{x}_mean")),
            100 * as_float(front.table.column("val_top1_mean")),
        )
        ax.step(fx, fy, where="post", color="black", lw=1.2, alpha=0.7, zorder=1, label="Pareto front")
        ax.scatter(fx, fy, s=140, facecolors="none", edgecolors="black", lw=1.2, zorder=4)
    legend(ax)
    if clipped:
        footnote(fig, CLIPPED_NOTE)
    return save(fig, out_dir, name)


def _points(
    ax,
    rows: pa.Table,
    xcol: str,
    ycol: str,
    cicol: str | None,
    style: Style,
    scale: float = 1.0,
    transform=None,
    bounds: tuple[float, float] | None = None,
) -> bool:
    """Error bars per mixer x regime; True when `bounds` cut any of them."""
    cut = False
    mixers, regimes = rows.column("mixer").to_pylist(), rows.column("regime").to_pylist()
    xs, ys = as_float(rows.column(xcol)), as_float(rows.column(ycol))
    ci = as_float(rows.column(cicol)) if cicol and cicol in rows.column_names else np.full(xs.size, np.nan)
    if transform is not None:
        ys = transform(ys)
    for mixer in mixer_order([m for m in mixers if m]):
        for regime in regime_order([r for r in regimes if r]):
            idx = [i for i in range(rows.num_rows) if mixers[i] == mixer and regimes[i] == regime]
            if not idx:
                continue
            half = _ci(ci[idx], scale)
            if bounds is not None:
                cut |= clipped(ys[idx] * scale, half, *bounds)
            ax.errorbar(
                xs[idx],
                ys[idx] * scale,
                yerr=half if bounds is None else bounded(ys[idx] * scale, half, *bounds),
                ls="none",
                ms=6,
                capsize=3,
                label=f"{mixer} · {regime}",
                zorder=3,
                **style.of(mixer, regime),
            )
    return cut


def error_figure(
    agg: pa.Table, fits: list[PowerLawFit], out_dir: Path, name: str = "error_vs_params"
) -> list[Path]:
    """Top-1 error (%) vs params, log-log, with each mixer x regime's fitted a·P^-b + c. Not drawn
    when no mixer x regime ran at two sizes (a study with one width: no scaling to show)."""
    rows = agg.filter(pc.greater(agg.column("n_used"), 0))
    if not varies_within(rows, "params_mean"):
        return []
    style = style_for(agg)
    fig, ax = axes(
        "Scaling: error vs parameters", LABELS["params"], "validation top-1 error (%)", logx=True, logy=True
    )
    _points(
        ax,
        rows,
        "params_mean",
        "val_top1_mean",
        "val_top1_ci95",
        style,
        scale=100.0,
        transform=lambda y: 1.0 - y,
    )
    params = as_float(rows.column("params_mean"))
    for fit in fits:
        if fit.status != "ok":
            continue
        mixer, regime = fit.group["mixer"], fit.group["regime"]
        sel = [
            i
            for i, (m, r) in enumerate(
                zip(rows.column("mixer").to_pylist(), rows.column("regime").to_pylist(), strict=True)
            )
            if m == mixer and r == regime
        ]
        lo, hi = np.nanmin(params[sel]), np.nanmax(params[sel])
        grid = np.geomspace(lo / 1.25, hi * 1.25, 100)
        ax.plot(
            grid,
            100 * fit.predict(grid),
            color=style.of(mixer, regime)["color"],
            ls=regime_line(regime),
            lw=1.2,
            label=f"fit {mixer} · {regime}: b={fit.b:.2f}",
        )
    legend(ax)
    return save(fig, out_dir, name)


def resolution_figure(
    agg: pa.Table, metric: str, front: Front | None, crossings: list, out_dir: Path, name: str, title: str
) -> list[Path]:
    """A benchmark metric vs resolution, one line per series x regime (x setting), log-log; not
    drawn for a single resolution."""
    rows = agg.filter(pc.greater(agg.column("n_used"), 0))
    if not varies(rows, "resolution"):
        return []
    style = style_for(agg)
    fig, ax = axes(title, LABELS["resolution"], LABELS[metric], logx=True, logy=True)
    keys = list(
        zip(
            rows.column("series").to_pylist(),
            rows.column("regime").to_pylist(),
            rows.column("mixer").to_pylist(),
            rows.column("backend").to_pylist(),
            rows.column("setting").to_pylist(),
            strict=True,
        )
    )
    res, vals = as_float(rows.column("resolution")), as_float(rows.column(f"{metric}_mean"))
    ci = as_float(rows.column(f"{metric}_ci95"))
    for key in dict.fromkeys(keys):
        series, regime, mixer, backend, setting = key
        idx = np.array([i for i, k in enumerate(keys) if k == key])
        idx = idx[np.argsort(res[idx])]
        ls = backend_line(mixer, backend)
        label = f"{series} · {regime}" + (f" ({setting})" if setting else "")
        ax.errorbar(
            res[idx],
            vals[idx],
            yerr=_ci(ci[idx]),
            ls=ls,
            ms=5,
            capsize=3,
            lw=1.2,
            label=label,
            **style.of(mixer, regime),
        )
    log_axis(ax.xaxis, sorted({float(r) for r in res if np.isfinite(r)}))
    if front is not None and front.table.num_rows:
        ax.scatter(
            as_float(front.table.column("resolution")),
            as_float(front.table.column(f"{metric}_mean")),
            s=120,
            facecolors="none",
            edgecolors="black",
            lw=1.1,
            zorder=4,
            label="best per resolution",
        )
    marks: dict[int, dict[str, list[str]]] = {}
    for c in crossings:
        if c.metric == metric and c.resolution:
            marks.setdefault(round(c.resolution), {}).setdefault(
                f"{c.candidate} passes {c.baseline}", []
            ).append(c.regime)
    for x, who in marks.items():  # one line per crossover resolution, naming every pair crossing there
        ax.axvline(x, color="gray", ls=":", lw=1)
        text = f"{x} px: " + "; ".join(f"{k} ({', '.join(v)})" for k, v in who.items())
        ax.annotate(
            text,
            (x, 0.02),
            xycoords=("data", "axes fraction"),
            xytext=(3, 0),
            textcoords="offset points",
            rotation=90,
            fontsize=6,
            color="gray",
            va="bottom",
            ha="left",
        )
    legend(ax, beside=bool(marks))  # inside, "best" placement dodges lines but not the crossover notes
    return save(fig, out_dir, name)


def cost_figure(
    agg: pa.Table, exponents: list[dict], out_dir: Path, name: str = "time_vs_tokens"
) -> list[Path]:
    """Seconds per image vs tokens, log-log, with each series' fitted power (the cost exponent)."""
    rows = agg.filter(pc.greater(agg.column("n_used"), 0))
    style = style_for(agg)
    fig, ax = axes(
        "Cost exponents: time vs tokens", "tokens per image", "time per image (s)", logx=True, logy=True
    )
    tok = "tokens_mean" if "tokens_mean" in rows.column_names else "tokens"
    ips = (
        "images_per_second_mean"
        if "images_per_second_mean" in rows.column_names
        else "train_images_per_second_mean"
    )
    series, regimes = rows.column("series").to_pylist(), rows.column("regime").to_pylist()
    mixers, x, y = (
        rows.column("mixer").to_pylist(),
        as_float(rows.column(tok)),
        1.0 / as_float(rows.column(ips)),
    )
    for e in exponents:
        if e["quantity"] != "seconds_per_image" or e.get("method", "ols") not in ("ols", "two_points"):
            continue
        idx = [i for i in range(rows.num_rows) if series[i] == e["series"] and regimes[i] == e["regime"]]
        st = style.of(mixers[idx[0]], e["regime"])
        ax.plot(x[idx], y[idx], ls="none", **st)
        grid = np.geomspace(np.nanmin(x[idx]), np.nanmax(x[idx]), 50)
        backend = e["series"].split("/")[1] if "/" in e["series"] else None
        ax.plot(
            grid,
            np.exp(e["intercept"]) * grid ** e["slope"],
            color=st["color"],
            lw=1,
            ls=backend_line(mixers[idx[0]], backend),
            label=f"{e['series']} · {e['regime']}: slope {e['slope']:.2f}"
            + (" (2 points, no fit)" if e.get("method") == "two_points" else ""),
        )
    legend(ax)
    return save(fig, out_dir, name)
