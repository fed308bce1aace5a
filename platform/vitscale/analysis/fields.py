"""Normalised analysis fields (mixer, regime, width, ...) over the two param namespaces.

Training trials say `model.mixer`, benchmark configurations `bench.mixer`; every later step reads
the plain names added here so it need not know which kind of study it is looking at.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

FIELDS: dict[str, tuple[str, ...]] = {
    "mixer": ("model.mixer", "bench.mixer"),
    "regime": ("model.regime", "bench.regime"),
    "width": ("model.width", "bench.width"),
    "depth": ("model.depth", "bench.depth"),
    "resolution": ("data.resolution", "bench.resolution", "model.image_size"),
    "patch_size": ("model.patch_size", "bench.patch_size"),
    "backend": ("model.attention_backend", "bench.attention_backend"),
    "num_gaussians": ("model.num_gaussians", "bench.num_gaussians"),
    "seed": ("train.seed", "bench.seed", "seed"),
}
SEED_COLUMNS = ("train.seed", "bench.seed", "seed", "bench.repeat")
BASELINE = "attention"
CANDIDATE = "ssog"


def first_present(table: pa.Table, names: tuple[str, ...]) -> pa.ChunkedArray | None:
    for name in names:
        if name in table.column_names:
            return table.column(name)
    return None


def with_fields(table: pa.Table) -> pa.Table:
    """Append `mixer, regime, width, ..., tokens, series, used` columns (missing sources -> nulls)."""
    n = table.num_rows
    out = table
    for name, sources in FIELDS.items():
        col = first_present(table, sources)
        if name in out.column_names:
            continue
        out = out.append_column(name, col if col is not None else pa.nulls(n, pa.string()))
    if "tokens" not in out.column_names:
        out = out.append_column("tokens", _tokens(out))
    out = out.append_column("series", pa.array(series_labels(out), pa.string()))
    used = pc.and_(pc.equal(out.column("status"), "FINISHED"), pc.invert(out.column("stopped_early")))
    return out.append_column("used", pc.fill_null(used, False))


def _tokens(table: pa.Table) -> pa.Array:
    """Tokens per image, (resolution / patch)^2, where both are known."""
    res, patch = table.column("resolution").to_pylist(), table.column("patch_size").to_pylist()
    vals = [
        float((r // p) ** 2) if isinstance(r, int | float) and isinstance(p, int | float) and p else None
        for r, p in zip(res, patch, strict=True)
    ]
    return pa.array(vals, pa.float64())


def series_labels(table: pa.Table) -> list[str]:
    """One curve per label: `attention/sdpa`, `attention/math`, `ssog` (`ssog/K8` if K varies)."""
    mixers = table.column("mixer").to_pylist()
    backends = table.column("backend").to_pylist()
    ks = table.column("num_gaussians").to_pylist()
    by_mixer_backends: dict[str, set] = {}
    by_mixer_k: dict[str, set] = {}
    for m, b, k in zip(mixers, backends, ks, strict=True):
        by_mixer_backends.setdefault(m, set()).add(b)
        by_mixer_k.setdefault(m, set()).add(k)
    labels = []
    for m, b, k in zip(mixers, backends, ks, strict=True):
        label = str(m)
        if m == BASELINE and b is not None:
            label += f"/{b}"
        elif m != BASELINE and len(by_mixer_k[m]) > 1 and k is not None:
            label += f"/K{k}"
        labels.append(label)
    return labels


def mixer_order(mixers: list[str]) -> list[str]:
    """Baseline first, candidate second, the rest alphabetically: stable colours and columns."""
    rank = {BASELINE: 0, CANDIDATE: 1}
    return sorted(set(mixers), key=lambda m: (rank.get(m, 2), m))


def regime_order(regimes: list[str]) -> list[str]:
    rank = {"discrete": 0, "looped": 1, "ode": 2}
    return sorted(set(regimes), key=lambda r: (rank.get(r, 3), str(r)))


def as_float(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Numeric column -> float64 numpy with NaN for nulls."""
    return np.asarray(pc.fill_null(pc.cast(col, pa.float64()), float("nan")), dtype=float)
