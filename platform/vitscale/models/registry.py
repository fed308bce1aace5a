"""Name -> class registries for mixers and regimes, and the settings each one owns.

A new mixer (or regime) is one file in models/mixers/ (models/regimes/) that decorates
its class with `@register_mixer("name", settings=ItsSettings)`, plus one import line in
that package's `__init__.py`. `ItsSettings` (a pydantic model beside the class) becomes
the section `model.<name>` of every ModelConfig; validation, study checks, CLI flags,
`model info`, bench records, MLflow params and analysis columns all read it from here.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

T = TypeVar("T")
PLUGINS_ENV = "VITSCALE_PLUGINS"  # "module_or_file.py[:function],...": mixers/regimes outside the package


class _Registry(dict):
    """A dict that imports its package on first use, so registrations are always loaded."""

    def __init__(self, package: str) -> None:
        super().__init__()
        self._package = package
        self._loaded = False
        self._settings: dict[str, type[BaseModel]] = {}

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            importlib.import_module(self._package)
            load_plugins(os.environ.get(PLUGINS_ENV, ""))

    def __contains__(self, key: object) -> bool:
        self._load()
        return super().__contains__(key)

    def __getitem__(self, key):
        self._load()
        return super().__getitem__(key)

    def __iter__(self):
        self._load()
        return super().__iter__()

    def __len__(self) -> int:
        self._load()
        return super().__len__()

    def keys(self):
        self._load()
        return super().keys()

    def items(self):
        self._load()
        return super().items()

    def settings(self) -> dict[str, type[BaseModel]]:
        """name -> settings model, for the entries that declare one (registration order)."""
        self._load()
        return dict(self._settings)

    def register(self, name: str, settings: type[BaseModel] | None = None) -> Callable[[T], T]:
        """Decorator: register a class under `name`, with the settings model it owns (if any)."""

        def decorate(cls: T) -> T:
            if dict.__contains__(self, name):
                raise KeyError(f"{name!r} is registered twice in {self._package}")
            if settings is not None and any(name in r._settings for r in _ALL if r is not self):
                raise KeyError(f"{name!r} already names a settings section of another registry")
            dict.__setitem__(self, name, cls)
            if settings is not None:
                self._settings[name] = settings
            return cls

        return decorate

    def unregister(self, name: str) -> None:
        """Remove an entry (test-only registrations clean up after themselves)."""
        dict.pop(self, name, None)
        self._settings.pop(name, None)


MIXERS = _Registry("vitscale.models.mixers")
REGIMES = _Registry("vitscale.models.regimes")
_ALL = (MIXERS, REGIMES)
register_mixer = MIXERS.register
register_regime = REGIMES.register

# The mixer every comparison is drawn against (the reference arm, the first series of a table) and
# the one the platform studies; benchmark tables and the analysis order their series by these.
BASELINE = "attention"
CANDIDATE = "ssog"


def mixer_order(names) -> list[str]:
    """Distinct mixer names: baseline first, candidate second, the rest alphabetically."""
    rank = {BASELINE: 0, CANDIDATE: 1}
    return sorted(set(names), key=lambda m: (rank.get(m, 2), str(m)))


def regime_order(names) -> list[str]:
    """Distinct regime names in registration order (discrete, looped, ode); unknown ones last."""
    rank = {name: i for i, name in enumerate(REGIMES)}
    return sorted(set(names), key=lambda r: (rank.get(r, len(rank)), str(r)))


_PLUGINS_DONE: set[str] = set()


def load_plugins(spec: str) -> None:
    """Import each plugin of a `VITSCALE_PLUGINS` value once per process, and call its function.

    Entries are `module` or `path/to/file.py`, optionally `:function` (called after the import,
    for plugins that register on demand). Subprocesses (benchmark workers) and Ray workers inherit
    the variable, so a mixer registered this way exists wherever a configuration is built.
    """
    for item in filter(None, (part.strip() for part in spec.split(","))):
        if item in _PLUGINS_DONE:
            continue
        _PLUGINS_DONE.add(item)
        target, _, function = item.partition(":")
        if target.endswith(".py"):
            name = "vitscale_plugin_" + Path(target).stem
            spec_ = importlib.util.spec_from_file_location(name, target)
            module = importlib.util.module_from_spec(spec_)
            sys.modules[name] = module
            spec_.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
        if function:
            getattr(module, function)()


def sections() -> dict[str, tuple[str, type[BaseModel]]]:
    """Settings sections of a ModelConfig: name -> ("mixer" | "regime", settings model)."""
    out: dict[str, tuple[str, type[BaseModel]]] = {}
    for kind, registry in (("mixer", MIXERS), ("regime", REGIMES)):
        out.update({name: (kind, model) for name, model in registry.settings().items()})
    return out


def moved_keys() -> dict[str, str]:
    """Old flat ModelConfig keys -> their new dotted place (`num_gaussians` -> `ssog.num_gaussians`).

    A settings model lists its old names in `moved_from: ClassVar[dict[str, str]]` (old key -> field).
    """
    out = {}
    for name, (_, model) in sections().items():
        for old, field in getattr(model, "moved_from", {}).items():
            out[old] = f"{name}.{field}"
    return out
