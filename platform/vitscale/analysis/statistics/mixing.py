"""The mixer's own FLOPs per configuration (`models.measure.mixing_flops`): the cost that scales
with the token grid, without the linear projections and MLPs that dilute a total-FLOPs slope.

Runs that logged a `mixing_flops` metric are read as they are; otherwise the mixer is rebuilt on
the meta device from the configuration's params (no memory, no compute) and counted per layer
and image. A configuration the models package cannot build (unknown mixer, missing sizes) gets NaN.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import torch
from pydantic import ValidationError

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
