"""One search-space parameter: a distribution plus an optional `when:` condition.

In YAML a parameter is a one-key mapping naming its distribution, with options beside it:

    model.mixer:  {choice: [attention, ssog]}                 # categorical (samplers and grids)
    model.depth:  {grid: [4, 8, 12]}                          # explicit values, grid studies only
    model.num_gaussians: {int: [1, 8], step: 1, when: {model.mixer: ssog}}
    train.lr:     {loguniform: [1.0e-4, 3.0e-3]}              # continuous, samplers only
    train.warmup_epochs: {uniform: [0, 5], step: 0.5}
    model: {grid: [{width: 192, heads: 3}, {width: 384, heads: 6}]}   # coupled: one value sets
                                                              # several fields of a section

`when:` maps leaf paths to a value or a list of accepted values; every entry must hold (AND).
A parameter whose condition fails is inactive: the trial keeps its base value.

Each distribution is one registered object (DISTRIBUTIONS, name -> Distribution) built on its
plain facts in `vitscale.distribution_facts`: it validates its options, lists its values and
bounds, and asks Optuna for a value. No module asks a parameter which distribution it is by name;
it asks `param.distribution`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

from vitscale.distribution_facts import DISTRIBUTION_FACTS, DistributionFacts

ENUMERATION_LIMIT = 1024  # int ranges up to this many values are checked value by value


def label(value: Any) -> Any:
    """A scalar standing for a choice value: itself, or canonical JSON for a mapping or list.

    Optuna's categorical choices must be scalars; coupled values ({width: 192, heads: 3}) are
    suggested as their labels and decoded back with `Param.decode`.
    """
    if isinstance(value, dict | list | tuple):
        return json.dumps(_canonical(value), separators=(",", ":"), default=str)
    return value


def _canonical(value: Any) -> Any:
    """Mappings with their keys in a fixed order; YAML keys may mix types (1, x, null, a date),
    which `sort_keys` cannot compare, so keys are ordered by their text (then type)."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: (str(kv[0]), type(kv[0]).__name__))
        return {k if isinstance(k, str) else str(k): _canonical(v) for k, v in items}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    return value


@dataclass(frozen=True)
class Distribution:
    """One distribution: its facts, the Param field holding it, and what a Param asks of it."""

    facts: DistributionFacts
    field: str  # the Param attribute its values sit in ("int_range" for `int:`)
    takes_step: bool = False
    takes_log: bool = False
    instead_of_log: str = ""  # log: true given here: what to use instead ("use loguniform")

    @property
    def name(self) -> str:
        return self.facts.name

    @property
    def listed(self) -> bool:
        return self.facts.listed

    @property
    def continuous(self) -> bool:
        return self.facts.continuous

    @property
    def grid_only(self) -> bool:
        return self.facts.grid_only

    def check(self, param: Param) -> None:
        """Raise ValueError (one line naming the option) on options this distribution refuses."""
        if param.step is not None and not self.takes_step:
            takers = " and ".join(n for n, d in DISTRIBUTIONS.items() if d.takes_step)
            raise ValueError(f"step: only {takers} take a step, not {self.name}")
        if param.log and not self.takes_log:
            takers = " and ".join(n for n, d in DISTRIBUTIONS.items() if d.takes_log)
            raise ValueError(f"log: only {takers} takes log: true ({self.instead_of_log or self.name})")
        self.check_values(param)

    def check_values(self, param: Param) -> None:
        """The values themselves (ranges in order, no repeats)."""

    def values(self, param: Param) -> Sequence[Any]:
        """Every value, in the order given; a continuous range has no finite list."""
        raise ValueError(f"{self.name} is continuous: it has no finite list of values")

    def representatives(self, param: Param, wanted: Iterable[Any]) -> list[Any]:
        """Values to check combinations with (Param.representatives): here, all of them."""
        return list(self.values(param))

    def bounds(self, param: Param) -> tuple[float, float] | None:
        """(low, high) of a range; None for listed values."""
        return None

    def suggest(self, trial: Any, name: str, param: Param) -> Any:
        """Ask an Optuna trial for a value under the Optuna name `name`."""
        raise NotImplementedError

    def decode(self, param: Param, value: Any) -> Any:
        """A value as Optuna or Ray hand it back -> the value it stands for."""
        return value


class ListedDistribution(Distribution):
    """choice / grid: the values as given, suggested as their labels."""

    def check_values(self, param: Param) -> None:
        labels = [label(v) for v in getattr(param, self.field)]
        dupes = sorted({str(x) for x in labels if labels.count(x) > 1})
        if dupes:
            raise ValueError(f"{self.name}: repeated value(s) {', '.join(dupes)}")

    def values(self, param: Param) -> Sequence[Any]:
        return list(getattr(param, self.field))

    def suggest(self, trial: Any, name: str, param: Param) -> Any:
        return trial.suggest_categorical(name, [label(v) for v in self.values(param)])

    def decode(self, param: Param, value: Any) -> Any:
        if isinstance(value, str):
            for v in self.values(param):
                if not isinstance(v, str) and label(v) == value:
                    return v
        return value


class IntRangeDistribution(Distribution):
    """int: whole numbers in [low, high] with a step, or on a log scale."""

    def check_values(self, param: Param) -> None:
        low, high = param.int_range
        step = param.step or 1
        if low > high:
            raise ValueError(f"int: low {low} is above high {high}")
        if step != int(step):
            raise ValueError(f"step: an int range needs a whole step, not {step}")
        if (high - low) % int(step):
            raise ValueError(f"int: high - low ({high - low}) is not a multiple of step {int(step)}")
        if param.log and (low < 1 or step != 1):
            raise ValueError("int: log: true needs low >= 1 and no step")

    def values(self, param: Param) -> Sequence[Any]:
        """A `range`: `int: [1, 1e12]` must be countable without a list of 10^12."""
        low, high = param.int_range
        return range(low, high + 1, int(param.step or 1))

    def representatives(self, param: Param, wanted: Iterable[Any]) -> list[Any]:
        low, high = param.int_range
        step = int(param.step or 1)
        count = (high - low) // step + 1
        if count <= ENUMERATION_LIMIT:
            return list(self.values(param))
        picks = {low + step * round(i * (count - 1) / 63) for i in range(64)}
        picks |= {v for v in wanted if _is_int(v) and low <= v <= high and (v - low) % step == 0}
        return sorted(picks)

    def bounds(self, param: Param) -> tuple[float, float] | None:
        return param.int_range

    def suggest(self, trial: Any, name: str, param: Param) -> Any:
        low, high = param.int_range
        return trial.suggest_int(name, low, high, step=int(param.step or 1), log=param.log)


class FloatRangeDistribution(Distribution):
    """uniform / loguniform: floats in [low, high]; only samplers draw them."""

    def check_values(self, param: Param) -> None:
        low, high = getattr(param, self.field)
        if low >= high:
            raise ValueError(f"{self.name}: low {low} must be below high {high}")
        if self.facts.log_scale and low <= 0:
            raise ValueError(f"{self.name}: low {low} must be > 0")
        if param.step is not None:
            steps = (high - low) / param.step
            if abs(steps - round(steps)) > 1e-9:
                raise ValueError(
                    f"{self.name}: high - low ({high - low}) is not a multiple of step {param.step}"
                )

    def representatives(self, param: Param, wanted: Iterable[Any]) -> list[Any]:
        low, high = getattr(param, self.field)
        inside = {float(v) for v in wanted if _is_number(v) and low <= v <= high}
        return sorted({low, high} | inside)

    def bounds(self, param: Param) -> tuple[float, float] | None:
        return getattr(param, self.field)

    def suggest(self, trial: Any, name: str, param: Param) -> Any:
        low, high = getattr(param, self.field)
        return trial.suggest_float(name, low, high, step=param.step, log=self.facts.log_scale)


DISTRIBUTIONS: dict[str, Distribution] = {}


def register_distribution(distribution: Distribution) -> Distribution:
    """Add `distribution` to DISTRIBUTIONS under its name; a name registers once."""
    if distribution.name in DISTRIBUTIONS:
        raise ValueError(f"distribution {distribution.name!r} is registered twice")
    DISTRIBUTIONS[distribution.name] = distribution
    return distribution


register_distribution(ListedDistribution(DISTRIBUTION_FACTS["choice"], "choice"))
register_distribution(ListedDistribution(DISTRIBUTION_FACTS["grid"], "grid"))
register_distribution(
    IntRangeDistribution(DISTRIBUTION_FACTS["int"], "int_range", takes_step=True, takes_log=True)
)
register_distribution(
    FloatRangeDistribution(
        DISTRIBUTION_FACTS["uniform"], "uniform", takes_step=True, instead_of_log="use loguniform"
    )
)
register_distribution(FloatRangeDistribution(DISTRIBUTION_FACTS["loguniform"], "loguniform"))
KINDS: tuple[str, ...] = tuple(DISTRIBUTIONS)


class Param(BaseModel):
    """A distribution over one space key, optionally conditional on other parameters."""

    model_config = ConfigDict(
        extra="forbid",
        populate_by_name=True,
        serialize_by_alias=True,
        json_schema_extra={"oneOf": [{"required": [k]} for k in KINDS]},
    )

    choice: list[Any] | None = Field(None, min_length=1, description="categorical values (any algorithm)")
    grid: list[Any] | None = Field(None, min_length=1, description="explicit values (grid studies)")
    int_range: tuple[int, int] | None = Field(None, alias="int", description="integers in [low, high]")
    uniform: tuple[float, float] | None = Field(None, description="floats in [low, high]")
    loguniform: tuple[float, float] | None = Field(None, description="floats in [low, high], log scale")
    step: float | None = Field(None, gt=0, description="int / uniform: spacing of the values")
    log: bool = Field(False, description="int: sample on a log scale")
    when: dict[str, Any] | None = Field(
        None, description="active only if every listed parameter has this value (or one of these values)"
    )

    @model_validator(mode="after")
    def _check(self) -> Param:
        given = [name for name, d in DISTRIBUTIONS.items() if getattr(self, d.field) is not None]
        if len(given) != 1:
            found = f"; found {', '.join(given)}" if given else ""
            raise ValueError(f"give exactly one distribution: {', '.join(KINDS)}{found}")
        DISTRIBUTIONS[given[0]].check(self)
        for path, cond in (self.when or {}).items():
            for v in cond if isinstance(cond, list) else [cond]:
                if isinstance(v, dict | list):
                    raise ValueError(f"when.{path}: give a value or a list of values, not {v!r}")
        return self

    @model_serializer(mode="wrap")
    def _compact(self, handler) -> dict[str, Any]:
        """Dump only what was given: {choice: [...]} rather than every empty option."""
        out = handler(self)
        return {k: v for k, v in out.items() if v is not None and not (k == "log" and v is False)}

    @property
    def distribution(self) -> Distribution:
        """The registered distribution this parameter gives (the one field that is set)."""
        for d in DISTRIBUTIONS.values():
            if getattr(self, d.field) is not None:
                return d
        raise AssertionError("validated Param without a distribution")

    @property
    def kind(self) -> str:
        """The distribution's name, for messages: "choice", "int", ..."""
        return self.distribution.name

    @property
    def is_finite(self) -> bool:
        """Choice, grid and int: a grid study can enumerate it."""
        return not self.distribution.continuous

    def values(self) -> Sequence[Any]:
        """Every value (finite distributions only), in the order given.

        An int range stays a `range`: `int: [1, 1e12]` must be countable without a list of 10^12.
        """
        return self.distribution.values(self)

    def representatives(self, wanted: Iterable[Any] = ()) -> list[Any]:
        """Values to check combinations with: all of a finite set, else the bounds (and a sample),
        plus those of `wanted` (values some `when:` waits for) that this range can produce."""
        return self.distribution.representatives(self, wanted)

    def bounds(self) -> tuple[float, float] | None:
        """(low, high) of numeric distributions; None for choice/grid."""
        return self.distribution.bounds(self)

    def suggest(self, trial: Any, name: str) -> Any:
        """A value from an Optuna trial under the Optuna name `name` (choices as their labels)."""
        return self.distribution.suggest(trial, name, self)

    def decode(self, value: Any) -> Any:
        """Map a label (as Optuna or Ray hand it back) to its value; values pass through."""
        return self.distribution.decode(self, value)

    def conditions(self) -> dict[str, list[Any]]:
        """`when:` normalised: path -> accepted values."""
        return {p: (c if isinstance(c, list) else [c]) for p, c in (self.when or {}).items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
