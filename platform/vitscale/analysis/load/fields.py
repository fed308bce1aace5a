"""Normalised analysis fields (mixer, regime, width, ... and every mixer's settings) over the params.

Training trials and benchmark configurations log their model the same way (`model.*`), so each
column here has one source (resolution: `data.resolution` for trials, `model.image_size` for
benchmarks, which have no data set). Mixer settings come from the registry: every field of a
registered mixer's settings becomes a column `<mixer>.<field>` (e.g. `<mixer>.num_gaussians`), filled
on that mixer's rows only, so a new mixer's settings reach every table with no edit here. A mixer
that declares a backend (`models.facts.Backend`: a setting choosing an implementation of the same
function) has it also in the column `backend`, which names its series and line styles.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from vitscale.models.facts import Backend
from vitscale.models.registry import MIXERS

FIELDS: dict[str, tuple[str, ...]] = {
    "mixer": ("model.mixer",),
    "regime": ("model.regime",),
    "width": ("model.width",),
    "depth": ("model.depth",),
    "resolution": ("data.resolution", "model.image_size"),
    "patch_size": ("model.patch_size",),
    "seed": ("train.seed", "bench.seed", "seed"),
}
SEED_COLUMNS = ("train.seed", "bench.seed", "seed", "bench.repeat")


def setting_fields() -> dict[str, tuple[str, str]]:
    """`<mixer>.<field>` -> (mixer, its param column), for every registered mixer's settings."""
    return {
        f"{mixer}.{field}": (mixer, f"model.{mixer}.{field}")
        for mixer, model in MIXERS.settings().items()
        for field in model.model_fields
    }


def declared_backend(mixer: str | None) -> Backend | None:
    """The backend switch `mixer` declares (None: it has none, or it is not registered)."""
    facts = MIXERS.facts().get(mixer) if mixer is not None else None
    return facts.backend if facts is not None else None


def backend_columns() -> dict[str, str]:
    """mixer -> the `<mixer>.<setting>` column of its backend, for the mixers that declare one."""
    out = {}
    for mixer, facts in MIXERS.facts().items():
        if facts.backend is not None:
            out[mixer] = f"{mixer}.{facts.backend.setting}"
    return out


def measured_backend(mixer: str | None, backend: str | None) -> str | None:
    """The backend a benchmark names for a trained run's value: none for a mixer without one, its
    setting's default where the run logged none, mapped as the mixer declares (what auto runs)."""
    declared = declared_backend(mixer)
    if declared is None:
        return None
    if backend is None:
        backend = MIXERS.settings()[mixer].model_fields[declared.setting].default
    return declared.measured_as.get(backend, backend)


def descriptive_fields() -> tuple[str, ...]:
    """The normalised columns a configuration is described by (no seed)."""
    return (*(f for f in FIELDS if f != "seed"), "backend", *setting_fields())


def identity_sources() -> set[str]:
    """Param columns that name a curve (mixer, regime, resolution, mixer settings), not a split of it."""
    out = {src for f in ("mixer", "regime", "resolution") for src in FIELDS[f]}
    return out | {column for _, column in setting_fields().values()}


def first_present(table: pa.Table, names: tuple[str, ...]) -> pa.ChunkedArray | None:
    for name in names:
        if name in table.column_names:
            return table.column(name)
    return None


def with_fields(table: pa.Table) -> pa.Table:
    """Append `mixer, regime, width, ..., <mixer>.<setting>, tokens, series, used` (missing -> nulls)."""
    n = table.num_rows
    out = table
    for name, sources in FIELDS.items():
        col = first_present(table, sources)
        if name in out.column_names:
            continue
        out = out.append_column(name, col if col is not None else pa.nulls(n, pa.string()))
    mixers = out.column("mixer").to_pylist()
    for name, (mixer, source) in setting_fields().items():
        if name in out.column_names:
            continue
        values = table.column(source).to_pylist() if source in table.column_names else [None] * n
        own = [v if m == mixer else None for m, v in zip(mixers, values, strict=True)]
        out = out.append_column(name, pa.array(own) if any(v is not None for v in own) else pa.nulls(n))
    if "backend" not in out.column_names:  # a mixer's backend: its curves' line style and label
        out = out.append_column("backend", _backends(out))
    if "tokens" not in out.column_names:
        out = out.append_column("tokens", _tokens(out))
    out = out.append_column("series", pa.array(series_labels(out), pa.string()))
    used = pc.and_(pc.equal(out.column("status"), "FINISHED"), pc.invert(out.column("stopped_early")))
    return out.append_column("used", pc.fill_null(used, False))


def _backends(table: pa.Table) -> pa.Array:
    """Per row the value of its mixer's declared backend setting (null for mixers without one)."""
    sources = {m: c for m, c in backend_columns().items() if c in table.column_names}
    columns = {c: table.column(c).to_pylist() for c in sources.values()}
    mixers = table.column("mixer").to_pylist()
    values = [columns[sources[m]][i] if m in sources else None for i, m in enumerate(mixers)]
    return pa.array(values, pa.string())


def _tokens(table: pa.Table) -> pa.Array:
    """Tokens per image, (resolution / patch)^2, where both are known."""
    res, patch = table.column("resolution").to_pylist(), table.column("patch_size").to_pylist()
    vals = [
        float((r // p) ** 2) if isinstance(r, int | float) and isinstance(p, int | float) and p else None
        for r, p in zip(res, patch, strict=True)
    ]
    return pa.array(vals, pa.float64())


def series_labels(table: pa.Table) -> list[str]:
    """One curve per label: the mixer, then its backend where it declares one (`<mixer>/<backend>`);
    a mixer setting that varies among a mixer's rows is appended (`<mixer>/num_gaussians=8`)."""
    mixers = table.column("mixer").to_pylist()
    backends = table.column("backend").to_pylist()
    settings = {
        name: table.column(name).to_pylist() for name in setting_fields() if name in table.column_names
    }
    switches = backend_columns()
    varying: dict[str, list[str]] = {}
    for name, values in settings.items():
        mixer = name.split(".", 1)[0]
        if len({repr(v) for m, v in zip(mixers, values, strict=True) if m == mixer}) > 1:
            varying.setdefault(mixer, []).append(name)
    labels = []
    for i, (m, b) in enumerate(zip(mixers, backends, strict=True)):
        label = str(m)
        if m in switches and b is not None:
            label += f"/{b}"
        for name in varying.get(m, []):
            if name != switches.get(m):
                label += f"/{name.split('.', 1)[1]}={settings[name][i]}"
        labels.append(label)
    return labels


def as_float(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Numeric column -> float64 numpy with NaN for nulls."""
    return np.asarray(pc.fill_null(pc.cast(col, pa.float64()), float("nan")), dtype=float)
