"""Dotted paths into `TrialConfig` ("model.width", "model.ode.rtol"): what they name, what they accept.

The search space is keyed by these paths, so this module is the one place that knows the shape
of a trial: a path is a *leaf* (a field holding a value) or a *section* (a nested config such
as `model` or `model.ode`, which a coupled parameter sets several fields of at once).
"""

from __future__ import annotations

import difflib
import functools
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, TypeAdapter, ValidationError
from pydantic.fields import FieldInfo

from vitscale.data.registry import DATASETS, LOADERS
from vitscale.models.registry import MIXERS, REGIMES, moved_keys, sections
from vitscale.train.config import AMP_MOVED, TrialConfig
from vitscale.validation import unwrap_optional

# Fields a study may not search, and what to do instead.
NOT_SEARCHABLE = {
    "model.image_size": "set data.resolution instead (the model is built at the data resolution)",
    "train.seed": "seeds are replicates: list them in search.seeds",
}


@dataclass(frozen=True)
class Node:
    """What a dotted path names: a section (`model`) or a leaf field (`model.width`)."""

    path: str
    section: type[BaseModel] | None = None
    info: FieldInfo | None = None

    @property
    def is_leaf(self) -> bool:
        return self.info is not None

    @property
    def annotation(self) -> Any:
        """The leaf's type, Optional unwrapped (None for a section)."""
        return unwrap_optional(self.info.annotation) if self.info else None

    @property
    def is_integer(self) -> bool:
        """An int field: int ranges and choices fit it, continuous distributions do not."""
        return self.annotation is int

    @property
    def is_categorical(self) -> bool:
        """Neither int nor float (str, bool, literal, tuple...): only listed values (choice, grid) fit."""
        ann = self.annotation
        return ann is not int and ann is not float


def fields_of(model: type[BaseModel]) -> dict[str, FieldInfo]:
    """A config's fields, with the sections registered mixers and regimes own (`ModelConfig.all_fields`)."""
    all_fields = getattr(model, "all_fields", None)
    return all_fields() if callable(all_fields) else model.model_fields


def lookup(path: str, root: type[BaseModel] = TrialConfig) -> Node | None:
    """The node a dotted path names below `root`, or None when no such field exists."""
    return _lookup(path, root, tuple(sections()))  # registrations change what exists


@functools.cache
def _lookup(path: str, root: type[BaseModel], _sections: tuple[str, ...]) -> Node | None:
    model, info = root, None
    for part in path.split("."):
        if model is None or part not in fields_of(model):
            return None
        info = fields_of(model)[part]
        ann = unwrap_optional(info.annotation)
        model = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
    if model is not None:
        return Node(path, section=model)
    return Node(path, info=info)


def leaf_paths(root: type[BaseModel] = TrialConfig, prefix: str = "") -> list[str]:
    """Every leaf path below `root`, in declaration order."""
    out = []
    for name, info in fields_of(root).items():
        ann = unwrap_optional(info.annotation)
        path = f"{prefix}{name}"
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += leaf_paths(ann, path + ".")
        else:
            out.append(path)
    return out


def suggest(path: str) -> str:
    """' (did you mean model.width?)' for a misspelt path, ' (moved to ...)' for an old one, else ''."""
    section, _, key = path.rpartition(".")
    if section in ("model", "trial.model", "benchmark.model") and key in moved_keys():
        return f" (moved to {section}.{moved_keys()[key]})"
    if path.removeprefix("trial.") == "train.amp":  # a space cannot search it: its values have a new key
        return f" ({AMP_MOVED.removeprefix('train.amp: ')}: search train.precision)"
    close = difflib.get_close_matches(path, leaf_paths(), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _adapter(path: str) -> TypeAdapter:
    return _adapter_for(path, tuple(sections()))


@functools.cache
def _adapter_for(path: str, _sections: tuple[str, ...]) -> TypeAdapter:
    info = lookup(path).info
    if not info.metadata:
        return TypeAdapter(info.annotation)
    return TypeAdapter(Annotated[info.annotation, *info.metadata])


def check_value(path: str, value: Any) -> str | None:
    """Why `value` cannot go in leaf `path` (type, range, registered name), or None when it can."""
    try:
        _adapter(path).validate_python(value)
    except ValidationError as exc:
        err = exc.errors()[0]
        return f"{value!r}: {err['msg']}"
    registry = _registries().get(path)
    if registry is not None and value not in registry:
        noun = path.rsplit(".", 1)[-1]
        return f"unknown {noun} {value!r}; choose one of {sorted(registry)}"
    return None


def _registries() -> dict[str, Any]:
    """Fields whose strings must be registered names (the registries load their plugins on first use)."""
    return {"model.mixer": MIXERS, "model.regime": REGIMES, "data.dataset": DATASETS, "data.loader": LOADERS}


def flatten_section(section: str, value: Any) -> dict[str, Any]:
    """A coupled value {width: 192, heads: 3} under `model` -> {'model.width': 192, 'model.heads': 3}.

    Nested mappings and dotted keys both work: {ode: {rtol: 1e-3}} == {'ode.rtol': 1e-3}.
    Keys that are no field are kept as given, for the checks to report.
    """
    out: dict[str, Any] = {}
    if not isinstance(value, dict):
        return out
    for key, item in value.items():
        path = f"{section}.{key}" if section else str(key)
        node = lookup(path)
        if isinstance(item, dict) and node is not None and not node.is_leaf:
            out.update(flatten_section(path, item))
        else:
            out[path] = item
    return out


def get_in(data: Any, path: str, default: Any = None) -> Any:
    """Value at a dotted path in nested dicts or pydantic models."""
    for part in path.split("."):
        if isinstance(data, BaseModel):
            data = getattr(data, part, default)
        elif isinstance(data, dict):
            data = data.get(part, default)
        else:
            return default
    return data
