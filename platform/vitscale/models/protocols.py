"""The Mixer and Regime protocols: the members `vit`, `measure` and the trainer call, checked when a
class is registered (`@register_mixer`) or, for a declared one, when it is first imported, so a
plugin that lacks one fails there in one line, not deep inside a forward.

Instance attributes set in `__init__` (a mixer's `width` and `build_grid`) cannot be seen on the
class; the docstrings of `models/mixers/__init__.py` and `models/regimes/__init__.py` list them.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Protocol, runtime_checkable

from vitscale.errors import UserError


@runtime_checkable
class Mixer(Protocol):
    """A token mixer: `Mixer(config)`, then `forward(x, grid_hw)` maps (B, P + H·W, C) tokens to
    the same shape."""

    def forward(self, x: Any, grid_hw: tuple[int, int]) -> Any: ...


@runtime_checkable
class Regime(Protocol):
    """How blocks are stacked: `Regime(config, make_block)`, `forward(x, grid_hw)`, the FLOPs of a
    forward and of a training step, the context the trainer opens around backward, the NFE of the
    latest forward (None where the notion does not apply), and whether FLOPs depend on the weights."""

    last_nfe: int | None
    flops_depend_on_values: bool

    def forward(self, x: Any, grid_hw: tuple[int, int]) -> Any: ...

    def forward_flops(self, outside: float, unit: float, nfe: float | None = None) -> float: ...

    def training_flops(
        self, outside: float, unit: float, forward_nfe: float | None = None, backward_nfe: float | None = None
    ) -> float: ...

    def backward_guard(self) -> AbstractContextManager[None]: ...


def protocol_members(protocol: type) -> list[str]:
    """The public names a protocol requires: its annotated attributes, then its methods."""
    annotated = list(getattr(protocol, "__annotations__", {}))
    methods = [n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")]
    return annotated + [m for m in methods if m not in annotated]


def missing_members(protocol: type, cls: Any) -> list[str]:
    """The members of `protocol` that `cls` (a class, or any object) does not have."""
    return [name for name in protocol_members(protocol) if not hasattr(cls, name)]


def check_protocol(protocol: type, kind: str, name: str, cls: Any, also_missing: list[str] = ()) -> None:
    """One line naming every member the registered `kind` `name` lacks (plus `also_missing`, the
    facts a decorated class must carry)."""
    missing = missing_members(protocol, cls) + list(also_missing)
    if missing or not callable(cls):
        where = f"{getattr(cls, '__module__', '?')}.{getattr(cls, '__qualname__', cls)}"
        lacks = ", ".join(missing) if missing else "a constructor (it is not a class)"
        raise UserError(
            f"{kind} {name!r} ({where}) does not meet the {protocol.__name__} protocol: it lacks {lacks} "
            f"(see vitscale.models.protocols.{protocol.__name__})"
        )
