"""Name -> class registries for mixers and regimes, and the settings each one owns.

A mixer (or regime) of the package is one file in models/mixers/ (models/regimes/) holding its
class, a light `<name>_settings.py` beside it holding its pydantic settings (no torch), and one
`declare_mixer("name", "vitscale.models.mixers.name:Class", settings=ItsSettings, ...)` line in
that package's `__init__.py`. `ItsSettings` becomes the section `model.<name>` of every
ModelConfig; validation, study checks, CLI flags, `model info`, bench records, MLflow params and
analysis columns all read it from here. A declaration also carries the facts a config is
validated and resolved with (`wants_pos_embed`, `default_layer_scale`, `check_config`), so the
CLI and `study validate` never import the (torch) class: it is imported when first built.
A plugin that already holds its class registers it directly: `@register_mixer("name", settings=...)`
(the facts are then read from the class's attributes). Every declaration's facts (`models.facts`:
validation's, the benchmarks', the figures' and the analysis's) are one plain-data table,
`MIXERS.facts()` / `REGIMES.facts()`; every class is checked against its protocol
(`models.protocols`) when registered, or when a declared one is first imported.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

from vitscale.models.facts import MixerFacts, RegimeFacts, facts_from, facts_of_class, required_facts
from vitscale.models.protocols import Mixer, Regime, check_protocol

T = TypeVar("T")
PLUGINS_ENV = "VITSCALE_PLUGINS"  # "module_or_file.py[:function],...": mixers/regimes outside the package


class _Registry(dict):
    """A dict that imports its package on first use, so registrations are always loaded.

    Values are the registered objects; a declared entry holds its "module:attribute" until the
    first lookup of its value imports it (names, settings and facts are known before that)."""

    def __init__(
        self, package: str, kind: str = "entry", protocol: type | None = None, facts_type: type | None = None
    ) -> None:
        super().__init__()
        self._package = package
        self._kind = kind  # "mixer" | "regime" | "data set": how errors name an entry
        self._protocol = protocol  # what a registered class must have (models.protocols)
        self._facts_type = facts_type  # MixerFacts | RegimeFacts; None: free keyword facts (data sets)
        self._loaded = False
        self._settings: dict[str, type[BaseModel]] = {}
        self._facts: dict[str, Any] = {}  # what is known of each entry without importing it

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
        value = super().__getitem__(key)
        if isinstance(value, str):  # declared: import "module:attribute" on first use
            module, _, attribute = value.partition(":")
            value = getattr(importlib.import_module(module), attribute)
            if self._protocol is not None:
                check_protocol(self._protocol, self._kind, key, value)
            dict.__setitem__(self, key, value)
        return value

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
        return [(name, self[name]) for name in self.keys()]

    def values(self):
        return [self[name] for name in self.keys()]

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fact(self, name: str, key: str, default: Any = None) -> Any:
        """A fact of entry `name` (e.g. `wants_pos_embed`): as declared, without importing the entry,
        or the registered object's attribute of that name."""
        self._load()
        if name not in self._facts:
            return getattr(self[name], key, default)
        facts = self._facts[name]
        return facts.get(key, default) if isinstance(facts, dict) else getattr(facts, key, default)

    def facts(self) -> dict[str, Any]:
        """name -> its facts (`MixerFacts` / `RegimeFacts`), in registration order: the plain-data
        table the benchmarks, figures and analysis read instead of naming an entry."""
        self._load()
        return {name: self._facts[name] for name in self.keys() if name in self._facts}

    def settings(self) -> dict[str, type[BaseModel]]:
        """name -> settings model, for the entries that declare one (registration order)."""
        self._load()
        return dict(self._settings)

    def register(self, name: str, settings: type[BaseModel] | None = None) -> Callable[[T], T]:
        """Decorator: register a class under `name`, with the settings model it owns (if any)."""

        def decorate(cls: T) -> T:
            facts = None
            if self._protocol is not None:
                lacking = [] if self._facts_type is None else _lacking_facts(self._facts_type, cls)
                check_protocol(self._protocol, self._kind, name, cls, lacking)
                facts = facts_of_class(self._facts_type, self._kind, name, cls) if self._facts_type else None
            self._add(name, cls, settings)
            if facts is not None:
                self._facts[name] = facts
            return cls

        return decorate

    def declare(self, name: str, target: str, settings: type[BaseModel] | None = None, **facts: Any) -> None:
        """Register `target` ("module:attribute") under `name` without importing it: its settings
        model and `facts` are what is known until the first lookup of `registry[name]`."""
        known = facts if self._facts_type is None else facts_from(self._facts_type, self._kind, name, facts)
        self._add(name, target, settings)
        self._facts[name] = known

    def _add(self, name: str, value: Any, settings: type[BaseModel] | None) -> None:
        if dict.__contains__(self, name):
            raise KeyError(f"{name!r} is registered twice in {self._package}")
        if settings is not None and any(name in r._settings for r in _ALL if r is not self):
            raise KeyError(f"{name!r} already names a settings section of another registry")
        dict.__setitem__(self, name, value)
        if settings is not None:
            self._settings[name] = settings

    def unregister(self, name: str) -> None:
        """Remove an entry (test-only registrations clean up after themselves)."""
        dict.pop(self, name, None)
        self._settings.pop(name, None)
        self._facts.pop(name, None)


MIXERS = _Registry("vitscale.models.mixers", "mixer", Mixer, MixerFacts)
REGIMES = _Registry("vitscale.models.regimes", "regime", Regime, RegimeFacts)
_ALL = (MIXERS, REGIMES)
register_mixer = MIXERS.register
register_regime = REGIMES.register
declare_mixer = MIXERS.declare
declare_regime = REGIMES.declare

# The mixer every comparison is drawn against (the reference arm, the first series of a table) and
# the one the platform studies; benchmark tables and the analysis order their series by these.
BASELINE = "attention"
CANDIDATE = "ssog"
# The mixer whose mixing costs almost nothing: its speed-up over the baseline is the ceiling of any
# mixer on that machine (benchmarks measure it by default and show it beside every ratio).
CEILING = "pooling"


def _lacking_facts(facts_type: type, cls: Any) -> list[str]:
    """The facts without a default that a decorated class does not carry as attributes."""
    return [name for name in required_facts(facts_type) if not hasattr(cls, name)]


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
