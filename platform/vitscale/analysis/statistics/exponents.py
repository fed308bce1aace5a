"""Cost exponents: how FLOPs and time per image grow with tokens, per series × regime × setting.

Three quantities, each labelled: total FLOPs per image (what today's tables show; its slope mixes
the quadratic mixing term with the linear projections and MLPs, so it understates the mixer's
exponent at small grids), the mixer's own FLOPs per layer (`mixing_flops`: ~N² for attention,
~N^1.5 for SSoG) and measured seconds per image. With three or more token counts, two estimates
each: the OLS log–log slope over all resolutions (with a t interval and r²), and the local slope
between the two largest resolutions, the regime the asymptotic exponent is about. With two there is
one row, `two_points`: the slope through them, which is both estimates at once and no fit (no
interval, no r², which two points would give as 1.000 whatever they are).

The mixer's own FLOPs per configuration (mixing_flops_per_row, by `models.measure.mixing_flops`):
the cost that scales with the token grid, without the linear projections and MLPs that dilute a
total-FLOPs slope.

Runs that logged a `mixing_flops` metric are read as they are; otherwise the mixer is rebuilt on
the meta device from the configuration's params (no memory, no compute) and counted per layer
and image. A configuration the models package cannot build (unknown mixer, missing sizes) gets NaN.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch
from pydantic import ValidationError
from scipy import stats

from vitscale.analysis.load.fields import as_float
from vitscale.dotted import nested
from vitscale.models.config import ModelConfig
from vitscale.models.measure import mixing_flops
from vitscale.models.registry import MIXERS


def _config(row: dict) -> ModelConfig | None:
    """The model of a row from its `model.*` params (every section included), built at its resolution."""
    values = nested(
        {
            column.removeprefix("model."): v
            for column, v in row.items()
            if column.startswith("model.") and v is not None
        }
    )
    if row.get("data.resolution") is not None:
        values["image_size"] = row["data.resolution"]
    if "mixer" not in values or "image_size" not in values:
        return None
    values = {k: v for k, v in values.items() if k in ModelConfig.all_fields()}  # old or foreign params
    try:
        return ModelConfig.model_validate(values)
    except ValidationError:
        return None


def mixer_flops(config: ModelConfig) -> float:
    """Token-mixing FLOPs of one layer for one image at the config's build resolution."""
    with torch.device("meta"):
        module = MIXERS[config.mixer](config)
    return float(mixing_flops(module, config.grid))


def mixing_flops_per_row(agg: pa.Table) -> np.ndarray:
    """Per aggregate row: the logged `mixing_flops_mean`, else the count from its config, else NaN."""
    if "mixing_flops_mean" in agg.column_names:
        return as_float(agg.column("mixing_flops_mean"))
    cache: dict[str, float] = {}
    out = np.full(agg.num_rows, np.nan)
    for i, row in enumerate(agg.to_pylist()):
        config = _config(row)
        if config is None:
            continue
        key = config.model_dump_json()
        if key not in cache:
            cache[key] = mixer_flops(config)
        out[i] = cache[key]
    return out


QUANTITY_LABELS = {
    "flops_per_image": "total FLOPs / image",
    "mixing_flops": "mixer FLOPs / layer (mixing_flops)",
    "seconds_per_image": "seconds / image",
}
METHOD_LABELS = {
    "ols": "log–log OLS, all resolutions",
    "local": "local, two largest resolutions",
    "two_points": "through the only two resolutions (no fit)",
}


def loglog_slope(x: np.ndarray, y: np.ndarray, level: float = 0.95) -> dict:
    """OLS slope of log y on log x with its t-based CI and r² (both None with fewer than 3 points:
    a line through two points fits them exactly, which says nothing)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    lx, ly = np.log(x[ok]), np.log(y[ok])
    out: dict = {"n": int(ok.sum()), "slope": None, "intercept": None, "ci": None, "r2": None}
    if np.unique(lx).size < 2:
        return out
    res = stats.linregress(lx, ly)
    out.update(slope=float(res.slope), intercept=float(res.intercept))
    if out["n"] >= 3:
        half = float(stats.t.ppf(0.5 + level / 2, out["n"] - 2) * res.stderr)
        out.update(ci=[out["slope"] - half, out["slope"] + half], r2=float(res.rvalue**2))
    return out


def local_slope(x: np.ndarray, y: np.ndarray) -> dict:
    """Slope of log y between the two largest distinct x (mean y at each): no interval."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ok = np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)
    xs = np.unique(x[ok])
    out: dict = {"n": 2, "slope": None, "intercept": None, "ci": None, "r2": None}
    if xs.size < 2:
        return out
    (x1, x2) = xs[-2:]
    y1, y2 = y[ok][x[ok] == x1].mean(), y[ok][x[ok] == x2].mean()
    slope = float(np.log(y2 / y1) / np.log(x2 / x1))
    out.update(slope=slope, intercept=float(np.log(y2) - slope * np.log(x2)), x_range=[float(x1), float(x2)])
    return out


TWO_POINTS = (("two_points", local_slope),)


def cost_exponents(agg: pa.Table) -> list[dict]:
    """One row per series × regime × setting × quantity × method with ≥ 2 token counts (methods
    `ols` and `local` from 3 token counts, `two_points` alone with 2)."""
    tokens_col = "tokens_mean" if "tokens_mean" in agg.column_names else "tokens"
    if tokens_col not in agg.column_names or "n_used" not in agg.column_names:
        return []
    ips = next(
        (c for c in ("images_per_second_mean", "train_images_per_second_mean") if c in agg.column_names), None
    )
    tokens, n_used = as_float(agg.column(tokens_col)), as_float(agg.column("n_used"))
    keys = ["series", "regime", "setting"]
    rows = list(zip(*(agg.column(k).to_pylist() for k in keys), strict=True))
    groups = {}
    for key in dict.fromkeys(rows):
        idx = np.array([i for i, r in enumerate(rows) if r == key and n_used[i] > 0], dtype=int)
        distinct = np.unique(tokens[idx][np.isfinite(tokens[idx])]).size
        if distinct >= 2:
            groups[key] = (idx, distinct)
    if not groups:
        return []
    quantities = {
        "flops_per_image": as_float(agg.column("flops_per_image_mean"))
        if "flops_per_image_mean" in agg.column_names
        else None,
        "mixing_flops": mixing_flops_per_row(agg),
        "seconds_per_image": 1.0 / as_float(agg.column(ips)) if ips else None,
    }
    out = []
    for key, (idx, distinct) in groups.items():
        group = {k: (v if isinstance(v, str) else str(v)) for k, v in zip(keys, key, strict=True)}
        methods = (("ols", loglog_slope), ("local", local_slope)) if distinct >= 3 else TWO_POINTS
        for name, vals in quantities.items():
            if vals is None:
                continue
            for method, estimate in methods:
                fit = estimate(tokens[idx], vals[idx])
                if fit["slope"] is not None:
                    out.append({**group, "quantity": name, "method": method, "x": "tokens", **fit})
    return out
