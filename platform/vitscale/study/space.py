"""Walking a search space: dependency order, `when:` conditions, grid expansion, define-by-run.

A *point* maps space keys to values: {"model.mixer": "ssog", "model": {"width": 192, "heads": 3}}.
It holds only the active parameters; every other field keeps the trial's base value.
Parameters are visited in *dependency order* — the file's order, except that a parameter comes
after every parameter its `when:` refers to — so a condition is always decided by values already
chosen (or by the base trial when the referenced field is not in the space).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from vitscale.study.distributions import Param
from vitscale.study.paths import flatten_section, get_in

GRID_LIMIT = 100_000  # grid points a study may expand to


class SpaceCycle(ValueError):
    """`when:` conditions that refer to each other in a circle."""

    def __init__(self, cycle: list[str]) -> None:
        self.cycle = cycle
        super().__init__(" -> ".join(cycle))


class TooManyPoints(ValueError):
    """A grid (or a check's enumeration) past its limit."""


def providers(space: Mapping[str, Param], path: str) -> list[str]:
    """Space keys that can set leaf `path`: the key itself or a coupled section above it."""
    return [k for k in space if k == path or path.startswith(k + ".")]


def dependencies(space: Mapping[str, Param]) -> dict[str, list[str]]:
    """key -> the space keys its `when:` refers to."""
    deps = {}
    for key, param in space.items():
        found: list[str] = []
        for path in param.conditions():
            found += [k for k in providers(space, path) if k not in found and k != key]
        deps[key] = found
    return deps


def ordered_keys(space: Mapping[str, Param], keys: Iterable[str] | None = None) -> list[str]:
    """`keys` (default: all) plus what they depend on, in dependency order; raises SpaceCycle."""
    deps = dependencies(space)
    order: list[str] = []
    state: dict[str, str] = {}

    def visit(key: str, trail: list[str]) -> None:
        if state.get(key) == "done":
            return
        if state.get(key) == "open":
            raise SpaceCycle(trail[trail.index(key) :] + [key])
        state[key] = "open"
        for dep in deps[key]:
            visit(dep, trail + [key])
        state[key] = "done"
        order.append(key)

    wanted = list(space) if keys is None else list(keys)
    for key in space:  # file order decides among independent keys
        if key in wanted:
            visit(key, [])
    return order


def effective(path: str, point: Mapping[str, Any], space: Mapping[str, Param], base: BaseModel) -> Any:
    """The value leaf `path` takes in a trial built from `point` on top of `base`."""
    if path in point:
        return point[path]
    for key in providers(space, path):
        if key in point:
            flat = flatten_section(key, space[key].decode(point[key]))
            if path in flat:
                return flat[path]
    return get_in(base, path)


def is_active(key: str, point: Mapping[str, Any], space: Mapping[str, Param], base: BaseModel) -> bool:
    """Whether every `when:` entry of `key` holds, given the values chosen so far."""
    for path, accepted in space[key].conditions().items():
        if effective(path, point, space, base) not in accepted:
            return False
    return True


def expand(
    space: Mapping[str, Param],
    base: BaseModel,
    values_of: Callable[[Param], Sequence[Any]],
    keys: Iterable[str] | None = None,
    limit: int = GRID_LIMIT,
) -> list[dict[str, Any]]:
    """Every point the parameters can form, each branching only where it is active."""
    points: list[dict[str, Any]] = [{}]
    for key in ordered_keys(space, keys):
        grown = []
        values = values_of(space[key])
        for point in points:
            if is_active(key, point, space, base):
                if len(grown) + len(values) > limit:  # before building them: `values` may be a huge range
                    raise TooManyPoints(f"more than {limit} points")
                grown += [{**point, key: v} for v in values]
            else:
                grown.append(point)
        if len(grown) > limit:
            raise TooManyPoints(f"more than {limit} points")
        points = grown
    return points


def sample(
    space: Mapping[str, Param], base: BaseModel, sampler: Callable[[str, Param], Any]
) -> dict[str, Any]:
    """Define-by-run: ask `sampler(key, param)` for each active parameter, in dependency order."""
    point: dict[str, Any] = {}
    for key in ordered_keys(space):
        if is_active(key, point, space, base):
            point[key] = space[key].decode(sampler(key, space[key]))
    return point


def active(space: Mapping[str, Param], base: BaseModel, point: Mapping[str, Any]) -> list[str]:
    """Keys active given a partial point, in dependency order (unassigned ones read the base)."""
    return [k for k in ordered_keys(space) if is_active(k, point, space, base)]


def optuna_sampler(trial: Any, prefix: str = "") -> Callable[[str, Param], Any]:
    """A `sample` callback that asks an Optuna trial (ask-and-tell or define-by-run).

    Each parameter's distribution asks: choice/grid -> suggest_categorical (mappings and lists as
    their JSON labels), int -> suggest_int, uniform/loguniform -> suggest_float. Optuna names are
    `prefix + key`.
    """

    def suggest(key: str, param: Param) -> Any:
        return param.suggest(trial, prefix + key)

    return suggest
