"""What a study's trials run with where its file leaves a value unset (null): the data set's
recipe, the trial's CPUs as threads, the mixer's and regime's LayerScale and position embedding.

`study show` prints the spec as written, where null means "left to a default"; `run_defaults`
says what each default became, per variant the study reaches (its arms, or the mixers, regimes
and data sets its space names), exactly as `run_trial` resolves it and MLflow logs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from vitscale.study import space as _space
from vitscale.study.comparison import arm_list
from vitscale.study.distributions import Param
from vitscale.study.errors import SpecError
from vitscale.study.kinds import STUDY_RULES
from vitscale.study.paths import flatten_section
from vitscale.study.resolve import run_params, run_trial
from vitscale.study.spec import StudySpec
from vitscale.tracking import layout

# The keys whose values decide the defaults: LayerScale and position embedding (mixer, regime),
# the recipe (data set).
DECIDING_KEYS = ("model.mixer", "model.regime", "data.dataset")


def run_defaults(spec: StudySpec) -> list[tuple[list[str], dict[str, Any]]]:
    """(variant names, {dotted key: value as run}) for every value the base trial leaves null, the
    space does not search and a trial runs with set, over the variants the study's kind reaches
    (`StudyRules.run_defaults`; a benchmark's configurations set everything)."""
    return STUDY_RULES[spec.kind].run_defaults(spec)


def space_variants(spec: StudySpec) -> list[dict[str, Any]]:
    """The combinations of DECIDING_KEYS values the study's trials take: the finite values its
    space gives those keys (the base trial's where the space has none)."""
    keys = [k for k in DECIDING_KEYS if k in spec.space and spec.space[k].is_finite]
    return _space.expand(spec.space, spec.trial, Param.values, keys=keys) if keys else [{}]


def arm_variants(spec: StudySpec) -> list[dict[str, Any]]:
    """A comparison's arms, by their DECIDING_KEYS values."""
    return [{k: v for k, v in arm.items() if k in DECIDING_KEYS} for arm in arm_list(spec)]


def defaults_over(
    spec: StudySpec, variants: Callable[[StudySpec], list[dict[str, Any]]]
) -> list[tuple[list[str], dict[str, Any]]]:
    """`run_defaults` over the points `variants(spec)` gives; variants that resolve alike share a
    row (['attention · looped', 'attention · ode'])."""
    searched = tuple(spec.space)  # the points set these (a coupled key: its whole section)
    unset = {
        k
        for k, v in flatten_section("", spec.trial.model_dump(mode="json")).items()
        if v is None and k not in searched and not k.startswith(tuple(f"{s}." for s in searched))
    }
    seed = spec.search.seeds[0]
    rows: list[tuple[list[str], dict[str, Any]]] = []
    for point in variants(spec):
        try:
            params = run_params(run_trial(spec, point, seed))
        except SpecError:
            continue  # a combination no trial takes (the study's checks report real problems)
        values = {k: v for k, v in params.items() if k in unset and v is not None}
        name = layout.run_name(point) if point else "every trial"
        row = next((r for r in rows if r[1] == values), None)
        if row is None:
            rows.append(([name], values))
        else:
            row[0].append(name)
    return [(names, values) for names, values in rows if values]
