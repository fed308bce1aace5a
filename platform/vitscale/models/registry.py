"""Name -> class registries for mixers and regimes.

A new mixer (or regime) is one file in models/mixers/ (models/regimes/) that decorates
its class with `@register_mixer("name")`, plus one import line in that package's
`__init__.py`. Nothing else changes: configs, the CLI and the tests read these dicts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class _Registry(dict):
    """A dict that imports its package on first use, so registrations are always loaded."""

    def __init__(self, package: str) -> None:
        super().__init__()
        self._package = package
        self._loaded = False

    def _load(self) -> None:
        if not self._loaded:
            self._loaded = True
            importlib.import_module(self._package)

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

    def register(self, name: str) -> Callable[[T], T]:
        def decorate(cls: T) -> T:
            if dict.__contains__(self, name):
                raise KeyError(f"{name!r} is registered twice in {self._package}")
            dict.__setitem__(self, name, cls)
            return cls

        return decorate


MIXERS = _Registry("vitscale.models.mixers")
REGIMES = _Registry("vitscale.models.regimes")
register_mixer = MIXERS.register
register_regime = REGIMES.register
