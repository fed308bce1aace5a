"""What a mixer or a regime declares about itself, as plain data: the facts every layer reads
without importing its (torch) class.

A declaration (`declare_mixer`, `declare_regime` in the folder's `__init__.py`, or the attributes
of a class registered with `@register_mixer` / `@register_regime`) becomes one `MixerFacts` or
`RegimeFacts`. Validation reads `wants_pos_embed`, `default_layer_scale` and `check_config`;
benchmarks read `benched`, `backend` and `bench_settings`; the analysis reads the rest (colours,
markers and line styles of figures, search axes, whether a regime counts NFE) through
`MIXERS.facts()` and `REGIMES.facts()`. So the analysis, the figures and the benchmark defaults
name no mixer or regime: a new one brings its own facts and appears everywhere.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from vitscale.errors import UserError


@dataclass(frozen=True)
class SearchAxis:
    """A study axis its owner's settings span (SSoG's number of Gaussians, an ODE's tolerance): how
    `vitscale analyze` draws test error along it when a study varies it.

    `settings` are fields of the owner's section (`model.<owner>.<field>`), the first the preferred
    x; `unless` maps a field to the values on which the axis means nothing (a fixed-grid solver
    ignores tolerances; a run that did not log the field counts as its default); `trend` names the
    fitted form (`power_law`, `log_linear_decade`, `log_linear_doubling`); `cost` a cost shown
    beside each level (`nfe`: function evaluations)."""

    name: str
    title: str
    xlabel: str
    settings: tuple[str, ...]
    trend: str = "power_law"
    cost: str | None = None
    x_names: Mapping[str, str] = field(default_factory=dict)  # field -> its axis label, where not xlabel
    unless: Mapping[str, tuple[Any, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Backend:
    """A mixer setting that picks an implementation of the same function (attention's `backend`):
    benchmarks measure each listed value as a series of its own, figures draw each with its line
    style, and a trained run's value reads as `measured_as` maps it (what `auto` runs in a
    benchmark) when it is matched to a benchmark's throughput."""

    setting: str
    lines: Mapping[str, str] = field(default_factory=dict)  # value -> matplotlib line style
    measured_as: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class MixerFacts:
    """What a mixer declares. `wants_pos_embed`: whether the ViT adds a learned absolute position
    embedding by default; `default_layer_scale`: the LayerScale it needs where the regime builds
    none; `check_config(config)`: a rule spanning its settings and the core fields (ValueError);
    `color`: its colour in every figure (None: a spare one by registration order); `axes`: the
    study axes its settings span; `backend`: its implementation switch, if any; `benched`:
    measured by `vitscale bench` unless `--mixers` says otherwise."""

    wants_pos_embed: bool
    default_layer_scale: float | None = None
    check_config: Callable[[Any], None] | None = None
    color: str | None = None
    axes: tuple[SearchAxis, ...] = ()
    backend: Backend | None = None
    benched: bool = False


@dataclass(frozen=True)
class RegimeFacts:
    """What a regime declares. `default_layer_scale`: the LayerScale it builds where
    `model.layer_scale` is unset; `check_config(config)` as for mixers; `counts_nfe`: its forward
    takes a measured number of vector-field evaluations (accuracy-vs-NFE fronts read its rows);
    `marker` / `line`: its marker and fit line style in figures (None: spares); `axes`: the study
    axes its settings span; `bench_settings`: its section of the model `vitscale bench` measures
    by default; `benched`: measured unless `--regimes` says otherwise."""

    default_layer_scale: float
    check_config: Callable[[Any], None] | None = None
    counts_nfe: bool = False
    marker: str | None = None
    line: str | None = None
    axes: tuple[SearchAxis, ...] = ()
    bench_settings: Mapping[str, Any] = field(default_factory=dict)
    benched: bool = False


def required_facts(facts_type: type) -> list[str]:
    """The facts a declaration must give (those without a default)."""
    return [
        f.name
        for f in dataclasses.fields(facts_type)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]


def facts_from(facts_type: type, kind: str, name: str, given: Mapping[str, Any]) -> Any:
    """`facts_type(**given)`, or one line naming what the declaration of `kind` `name` lacks or
    spells wrong."""
    fields = {f.name: f for f in dataclasses.fields(facts_type)}
    unknown = sorted(set(given) - set(fields))
    if unknown:
        raise UserError(
            f"{kind} {name!r}: unknown declaration key(s) {', '.join(unknown)}; "
            f"a {kind} declares {', '.join(fields)}"
        )
    missing = [f for f in required_facts(facts_type) if f not in given]
    if missing:
        raise UserError(
            f"{kind} {name!r}: its declaration lacks {', '.join(missing)} ({facts_type.__name__})"
        )
    return facts_type(**given)


def facts_of_class(facts_type: type, kind: str, name: str, cls: Any) -> Any:
    """The facts a class registered with the decorator carries as attributes of the same names."""
    names = [f.name for f in dataclasses.fields(facts_type)]
    return facts_from(facts_type, kind, name, {f: getattr(cls, f) for f in names if hasattr(cls, f)})
