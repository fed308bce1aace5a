"""Checks of a search space against the trial it modifies. Each returns every problem it finds.

Combination rule (shape checks, mixer/regime guards, never-active parameters): the checker
enumerates the points the relevant parameters can form — honouring `when:` and coupled values,
and using the base trial for every field the space does not set. Finite distributions contribute
all their values; int ranges with more than 1024 values contribute 64 evenly spaced ones
including both bounds; continuous ones their two bounds; both also every value in their range that
some `when:` waits for. A rule that fails on any enumerated
point is an error (e.g. heads 3 with width 100 from `int: [64, 128]`). Enumerations past 20,000
points are skipped rather than guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from vitscale.models.registry import sections
from vitscale.study.distributions import Param
from vitscale.study.errors import Problem
from vitscale.study.paths import NOT_SEARCHABLE, check_value, flatten_section, lookup, suggest
from vitscale.study.space import SpaceCycle, TooManyPoints, effective, expand, ordered_keys, providers

CHECK_LIMIT = 20_000


def guards() -> tuple[tuple[str, str, str], ...]:
    """Sections used by one mixer or regime only: (path, field that must have the value, value).

    Read from the registry: every mixer or regime that declares settings owns `model.<name>`.
    """
    return tuple((f"model.{name}", f"model.{kind}", name) for name, (kind, _) in sections().items())


# (divisor field, dividend field, message); a dividend may be a list (other resolutions): every entry
SHAPES = (
    ("model.heads", "model.width", "heads {a} does not divide width {b}"),
    ("model.patch_size", "data.resolution", "resolution {b} is not divisible by patch_size {a}"),
    (
        "model.patch_size",
        "data.train_resolutions",
        "train_resolutions {b} are not all divisible by patch_size {a}",
    ),
    (
        "model.patch_size",
        "train.eval_resolutions",
        "eval_resolutions {b} are not all divisible by patch_size {a}",
    ),
)


def _join(prefix: str, key: str) -> str:
    return f"{prefix}.{key}" if prefix else key


def set_paths(key: str, param: Param) -> set[str]:
    """Leaf paths a parameter can set: itself, or the fields named in its coupled values."""
    node = lookup(key)
    if node is None or node.is_leaf or not param.distribution.listed:
        return {key}  # a range over a section is an error reported on its own; never enumerate it
    return {p for v in param.values() for p in flatten_section(key, v)}


def check_structure(space: Mapping[str, Param], prefix: str = "space") -> list[Problem]:
    """Paths, value types and ranges, `when:` references, overlaps and cycles: no base trial needed."""
    problems = []
    for key, param in space.items():
        problems += _check_param(key, param, space, _join(prefix, key))
    for key in space:
        for other in space:
            if other.startswith(key + ".") and _overlaps(key, space[key], other):
                problems.append(Problem(_join(prefix, other), f"also set by {_join(prefix, key)}; keep one"))
    try:
        ordered_keys(space)
    except SpaceCycle as cycle:
        problems.append(Problem(_join(prefix, cycle.cycle[0]) + ".when", f"conditions form a cycle: {cycle}"))
    return problems


def _check_param(key: str, param: Param, space: Mapping[str, Param], where: str) -> list[Problem]:
    if key in NOT_SEARCHABLE:
        return [Problem(where, f"cannot be searched: {NOT_SEARCHABLE[key]}")]
    node = lookup(key)
    if node is None:
        hint = (
            " (space keys are relative to trial: drop the 'trial.')"
            if key.startswith("trial.")
            else suggest(key)
        )
        return [Problem(where, f"not a field of the trial config{hint}")]
    problems = []
    if node.is_leaf:
        if node.is_categorical and not param.distribution.listed:
            problems.append(Problem(where, f"{key} takes choice or grid values, not {param.kind}"))
        elif node.is_integer and param.distribution.continuous:
            problems.append(
                Problem(where, f"{key} is an integer: use int: [low, high] or choice, not {param.kind}")
            )
        else:
            values = param.values() if param.distribution.listed else list(param.bounds())
            why = next((w for v in values if (w := check_value(key, v))), None)
            if why:
                problems.append(Problem(where, why))
    elif not param.distribution.listed or not all(isinstance(v, dict) for v in param.values()):
        problems.append(
            Problem(
                where,
                f"{key} is a section: give mappings of its fields, e.g. {{choice: [{{width: 192, heads: 3}}]}}",
            )
        )
    else:
        items = [item for value in param.values() for item in flatten_section(key, value).items()]
        why = next((w for path, item in items if (w := _coupled_problem(path, item))), None)
        if why:
            problems.append(Problem(where, why))
    for path, accepted in param.conditions().items():
        cond = lookup(path)
        if key in providers(space, path):
            problems.append(Problem(f"{where}.when", "a parameter cannot depend on itself"))
        elif cond is None:
            problems.append(
                Problem(
                    f"{where}.when",
                    f"{path} is neither a space parameter nor a field of the trial{suggest(path)}",
                )
            )
        elif not cond.is_leaf:
            problems.append(Problem(f"{where}.when", f"{path} is a section; name one of its fields"))
        elif why := next((w for v in accepted if (w := check_value(path, v))), None):
            problems.append(Problem(f"{where}.when.{path}", why))
    return problems


def _coupled_problem(path: str, item: Any) -> str | None:
    """Why one field of a coupled value cannot be set to `item`, or None."""
    node = lookup(path)
    if path in NOT_SEARCHABLE:
        return f"{path} cannot be searched: {NOT_SEARCHABLE[path]}"
    if node is None or not node.is_leaf:
        return f"{path} is not a field of the trial config{suggest(path)}"
    return check_value(path, item)


def _overlaps(section: str, param: Param, other: str) -> bool:
    return any(
        p == other or p.startswith(other + ".") or other.startswith(p + ".")
        for p in set_paths(section, param)
    )


def check_against_trial(
    space: Mapping[str, Param], base: BaseModel, prefix: str = "space", unknown: Iterable[str] = ()
) -> list[Problem]:
    """Never-active parameters, mixer/regime-only fields, and shapes over every combination.

    `unknown`: keys of broken parameters left out of `space`; a rule reading a field they would
    set is skipped rather than judged on the base value.
    """
    unknown = list(unknown)
    problems = []
    for key, param in space.items():
        if param.when and _any_point(space, base, [key], lambda p, k=key: k in p) is False:
            problems.append(
                Problem(_join(prefix, key), f"never active: its when: {_show(param.when)} never holds")
            )
            continue
        for guarded, field, value in guards():
            if not any(p == guarded or p.startswith(guarded + ".") for p in set_paths(key, param)):
                continue
            if providers(unknown, field):
                continue
            keys = [key, *providers(space, field)]

            def used(point: dict, key: str = key, field: str = field, value: str = value) -> bool:
                return key in point and effective(field, point, space, base) == value

            if _any_point(space, base, keys, used) is False:
                problems.append(
                    Problem(
                        _join(prefix, key),
                        f"only the {value} {field.split('.')[-1]} uses {guarded}, and {field} is never "
                        f"{value} where this parameter is active (remove it, or let {field} be {value})",
                    )
                )
    for small, big, template in SHAPES:
        keys = providers(space, small) + providers(space, big)
        if not keys or providers(unknown, small) or providers(unknown, big):
            continue
        bad = _first_point(
            space, base, keys, lambda p, s=small, b=big: _divides(p, s, b, space, base) is False
        )
        if bad is not None:
            a, b = effective(small, bad, space, base), effective(big, bad, space, base)
            culprit = next((k for k in providers(space, small) if k in bad), None) or next(
                (k for k in keys if k in bad), keys[0]
            )
            combo = ", ".join(f"{k}={v}" for k, v in bad.items())
            problems.append(Problem(_join(prefix, culprit), template.format(a=a, b=b) + f" (at {combo})"))
    return problems


def _divides(point: dict, small: str, big: str, space: Mapping[str, Param], base: BaseModel) -> bool | None:
    a, b = effective(small, point, space, base), effective(big, point, space, base)
    values = b if isinstance(b, list) else [b]
    if not (isinstance(a, int) and all(isinstance(v, int) for v in values)) or a <= 0 or not values:
        return None  # a type problem (or an unset list), reported elsewhere
    return all(v % a == 0 for v in values)


def _representatives(space: Mapping[str, Param]) -> Callable[[Param], list[Any]]:
    """Param.representatives that also include every value some `when:` waits for (a when: on one
    value of a sampled 10^12-wide range would otherwise look never active)."""
    wanted: dict[int, list[Any]] = {}
    for param in space.values():
        for path, accepted in param.conditions().items():
            if path in space:
                wanted.setdefault(id(space[path]), []).extend(accepted)
    return lambda param: param.representatives(wanted.get(id(param), ()))


def _first_point(space, base, keys, test: Callable[[dict], bool]) -> dict | None:
    try:
        points = expand(space, base, _representatives(space), keys, limit=CHECK_LIMIT)
    except TooManyPoints:
        return None
    return next((p for p in points if test(p)), None)


def _any_point(space, base, keys, test: Callable[[dict], bool]) -> bool | None:
    """Whether some enumerated point passes `test`; None when the enumeration is too large."""
    try:
        points = expand(space, base, _representatives(space), keys, limit=CHECK_LIMIT)
    except TooManyPoints:
        return None
    return any(test(p) for p in points)


def _show(when: dict[str, Any]) -> str:
    return "{" + ", ".join(f"{k}: {v}" for k, v in when.items()) + "}"
