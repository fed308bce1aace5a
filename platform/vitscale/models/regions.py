"""Regional `torch.compile`: each regime compiles the part of the model that repeats.

`torch.compile(model)` does not give one graph of a ViT here. ViT.forward's kernel-cache scope
breaks the graph, so dynamo compiles the frames below it one by one; for an ODE model those frames
are torchdiffeq's solver loop, and the field's evaluation counters (its closure's `calls`,
`nfe_count`) are Python ints dynamo guards on. A whole-model compile of a midpoint ODE therefore
recompiled the solver's step at every field evaluation, and past dynamo's recompile limit it ran
eagerly: compiled ODE training ran at 0.6-0.9x its eager speed.

So a regime names its region (`Discrete`/`Looped`: the whole stack of blocks, as whole-model
compile already gave them; `NeuralOde`: one evaluation of the field, the block's residual
branches, which the solver loop and the counters call from outside), and `compile_regions`
switches the regions of a model on. The compiled functions are module-level, one per function,
mode and dynamic setting, and take the module as an argument: identical blocks share one graph,
and a deep copy of the model (`served_model`) holds no reference to the original's methods.
Everything else (the patch embedding, the head, the ODE solver) stays eager.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from torch import nn

# (function, mode, dynamic) -> its torch.compile'd twin
_COMPILED: dict[tuple[Callable, str, bool | None], Callable] = {}


@dataclass(frozen=True)
class Setting:
    """How a region runs: eagerly (`mode` None) or compiled in `mode` with `dynamic`."""

    mode: str | None = None
    dynamic: bool | None = None

    def __str__(self) -> str:
        return "eager" if self.mode is None else f"compiled({self.mode}, dynamic={self.dynamic})"


EAGER = Setting()


def compiled(fn: Callable, setting: Setting) -> Callable:
    """`fn` itself when eager, else its compiled twin (made once per function and setting)."""
    if setting.mode is None:
        return fn
    key = (fn, setting.mode, setting.dynamic)
    if key not in _COMPILED:
        _COMPILED[key] = torch.compile(fn, mode=_torch_mode(setting.mode), dynamic=setting.dynamic)
    return _COMPILED[key]


def bound(module: nn.Module, name: str, setting: Setting) -> Callable:
    """`module.name` when eager (an instance's own override included), else the compiled twin of
    the class's function, bound to `module`."""
    if setting.mode is None:
        return getattr(module, name)
    return functools.partial(compiled(getattr(type(module), name), setting), module)


def regions(model: nn.Module) -> list[nn.Module]:
    """The modules of `model` that run a region (the regimes: they have `region_setting`)."""
    return [m for m in model.modules() if hasattr(m, "region_setting")]


def compile_regions(model: nn.Module, mode: str = "default", dynamic: bool | None = None) -> nn.Module:
    """`model` with its regimes' regions compiled from now on (in place; `model` is returned).

    A model without regimes (a test's stand-in) is compiled whole, as `torch.compile` would."""
    found = regions(model)
    if not found:
        return torch.compile(model, mode=_torch_mode(mode), dynamic=dynamic)
    for module in found:
        module.region_setting = Setting(mode, dynamic)
    return model


def uncompile(model: nn.Module) -> list[tuple[nn.Module, Setting]]:
    """Every region of `model` eager from now on; returns each region with its setting before."""
    before = [(m, m.region_setting) for m in regions(model)]
    for module, _ in before:
        module.region_setting = EAGER
    return before


@contextlib.contextmanager
def eager(model: nn.Module) -> Iterator[None]:
    """Within: every region of `model` runs eagerly (a FLOP count must see aten ops and module
    names, which a compiled graph hides). The settings come back after."""
    before = uncompile(model)
    try:
        yield
    finally:
        for module, setting in before:
            module.region_setting = setting


def _torch_mode(mode: str | None) -> str | None:
    """`torch.compile`'s `mode` for a vitscale one ("default" is torch's None)."""
    return None if mode == "default" else mode
