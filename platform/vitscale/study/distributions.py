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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_serializer, model_validator

Kind = Literal["choice", "grid", "int", "uniform", "loguniform"]
KINDS: tuple[str, ...] = ("choice", "grid", "int", "uniform", "loguniform")
CONTINUOUS = ("uniform", "loguniform")
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
        given = [k for k in KINDS if getattr(self, "int_range" if k == "int" else k) is not None]
        if len(given) != 1:
            found = f"; found {', '.join(given)}" if given else ""
            raise ValueError(f"give exactly one distribution: {', '.join(KINDS)}{found}")
        kind = given[0]
        if self.step is not None and kind not in ("int", "uniform"):
            raise ValueError(f"step: only int and uniform take a step, not {kind}")
        if self.log and kind != "int":
            raise ValueError(
                f"log: only int takes log: true ({'use loguniform' if kind == 'uniform' else kind})"
            )
        if kind == "int":
            low, high = self.int_range
            step = self.step or 1
            if low > high:
                raise ValueError(f"int: low {low} is above high {high}")
            if step != int(step):
                raise ValueError(f"step: an int range needs a whole step, not {step}")
            if (high - low) % int(step):
                raise ValueError(f"int: high - low ({high - low}) is not a multiple of step {int(step)}")
            if self.log and (low < 1 or step != 1):
                raise ValueError("int: log: true needs low >= 1 and no step")
        if kind in CONTINUOUS:
            low, high = getattr(self, kind)
            if low >= high:
                raise ValueError(f"{kind}: low {low} must be below high {high}")
            if kind == "loguniform" and low <= 0:
                raise ValueError(f"loguniform: low {low} must be > 0")
            if self.step is not None:
                steps = (high - low) / self.step
                if abs(steps - round(steps)) > 1e-9:
                    raise ValueError(
                        f"uniform: high - low ({high - low}) is not a multiple of step {self.step}"
                    )
        values = self.choice if kind == "choice" else self.grid if kind == "grid" else None
        if values is not None:
            labels = [label(v) for v in values]
            dupes = sorted({str(x) for x in labels if labels.count(x) > 1})
            if dupes:
                raise ValueError(f"{kind}: repeated value(s) {', '.join(dupes)}")
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
    def kind(self) -> Kind:
        for k in KINDS:
            if getattr(self, "int_range" if k == "int" else k) is not None:
                return k  # type: ignore[return-value]
        raise AssertionError("validated Param without a distribution")

    @property
    def is_finite(self) -> bool:
        """Choice, grid and int: a grid study can enumerate it."""
        return self.kind not in CONTINUOUS

    def values(self) -> Sequence[Any]:
        """Every value (finite distributions only), in the order given.

        An int range stays a `range`: `int: [1, 1e12]` must be countable without a list of 10^12.
        """
        if self.kind == "choice":
            return list(self.choice)
        if self.kind == "grid":
            return list(self.grid)
        if self.kind == "int":
            low, high = self.int_range
            return range(low, high + 1, int(self.step or 1))
        raise ValueError(f"{self.kind} is continuous: it has no finite list of values")

    def representatives(self, wanted: Iterable[Any] = ()) -> list[Any]:
        """Values to check combinations with: all of a finite set, else the bounds (and a sample),
        plus those of `wanted` (values some `when:` waits for) that this range can produce."""
        if self.kind == "int":
            low, high = self.int_range
            step = int(self.step or 1)
            count = (high - low) // step + 1
            if count <= ENUMERATION_LIMIT:
                return list(self.values())
            picks = {low + step * round(i * (count - 1) / 63) for i in range(64)}
            picks |= {v for v in wanted if _is_int(v) and low <= v <= high and (v - low) % step == 0}
            return sorted(picks)
        if self.kind in CONTINUOUS:
            low, high = getattr(self, self.kind)
            inside = {float(v) for v in wanted if _is_number(v) and low <= v <= high}
            return sorted({low, high} | inside)
        return self.values()

    def bounds(self) -> tuple[float, float] | None:
        """(low, high) of numeric distributions; None for choice/grid."""
        if self.kind == "int":
            return self.int_range
        if self.kind in CONTINUOUS:
            return getattr(self, self.kind)
        return None

    def decode(self, value: Any) -> Any:
        """Map a label (as Optuna or Ray hand it back) to its value; values pass through."""
        if self.kind in ("choice", "grid") and isinstance(value, str):
            for v in self.values():
                if not isinstance(v, str) and label(v) == value:
                    return v
        return value

    def conditions(self) -> dict[str, list[Any]]:
        """`when:` normalised: path -> accepted values."""
        return {p: (c if isinstance(c, list) else [c]) for p, c in (self.when or {}).items()}


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
