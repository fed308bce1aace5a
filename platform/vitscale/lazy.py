"""Names a package exports without importing them: a module `__getattr__` (PEP 562) over a table.

Import time matters where a light package (configs, registries) also exports names backed by
torch: `vitscale --help` and `study validate` read the configs, a trial reads `build` and `fit`.

    __getattr__ = lazy_exports(__name__, {"build": "vitscale.models.vit"})
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy_exports(package: str, table: dict[str, str]) -> Callable[[str], Any]:
    """The `__getattr__` of `package`: each name of `table` (name -> module) imported on first read."""

    def __getattr__(name: str) -> Any:
        if name in table:
            value = getattr(importlib.import_module(table[name]), name)
            if table[name] == f"{package}.{name}":
                # Kept on the package: importing the submodule of the same name (vitscale.data.throughput
                # for `throughput`) set the package's attribute to that module, which every later read
                # would otherwise get instead of the function. Other names are looked up on every
                # read, so a patched module-level name (tests' mock.patch) is seen.
                setattr(importlib.import_module(package), name, value)
            return value
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return __getattr__
