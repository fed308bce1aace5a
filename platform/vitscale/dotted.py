"""Dotted keys and nested mappings: `{'ode.rtol': 1e-3}` <-> `{'ode': {'rtol': 1e-3}}`.

Study overrides, MLflow params, CLI flags and analysis columns all name a value by its dotted path;
these are the one place that path is walked into nested dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def set_in(data: dict, path: str, value: Any) -> None:
    """Set a dotted path in nested dicts, creating the mappings on the way (also in place of an
    unset optional section, None, such as a trial without `train.distill`)."""
    *parents, last = path.split(".")
    for part in parents:
        if data.get(part) is None:
            data[part] = {}
        data = data[part]
    data[last] = value


def nested(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted keys -> nested dicts: {'mixer': 'ssog', 'ssog.num_gaussians': 4} ->
    {'mixer': 'ssog', 'ssog': {'num_gaussians': 4}}."""
    out: dict[str, Any] = {}
    for path, value in flat.items():
        set_in(out, path, value)
    return out
