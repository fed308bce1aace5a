"""`--set PATH=VALUE` on the commands that build one config from their flags (`train`, `bench`).

The study commands' `--set` edits the study file; here it edits the mapping the flags built, with
the same parser (`vitscale.study.apply_overrides`: dotted path, `[i]` for list items, the value
is YAML). `--set` is applied after the flags, so it wins over them; then the config's pydantic
model validates the result, and each problem is one line naming the key (`--set KEY: ...` when a
`--set` wrote it, with the closest known key for a misspelt one).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Annotated, Any, TypeVar

import typer
from pydantic import BaseModel, ValidationError

from vitscale.study import SpecError, apply_overrides
from vitscale.validation import error_items

M = TypeVar("M", bound=BaseModel)


def set_option(what: str, examples: str) -> Any:
    """The `--set` option of a command whose config is `what`; `examples` like `model.width=32`."""
    return Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            metavar="PATH=VALUE",
            help=f"Set a key of {what} after the flags (so --set wins), e.g. {examples}; "
            "the value is YAML; repeatable.",
        ),
    ]


def validate_with_sets(model: type[M], raw: dict[str, Any], sets: Sequence[str], example: str) -> M:
    """`raw` (from the flags) with each `--set` applied in order, validated by `model`.

    Raises SpecError, one line per problem; `example` is a valid `PATH=VALUE` for the hint."""
    raw, touched = apply_overrides(copy.deepcopy(raw), sets, example)
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for key, message in error_items(exc, model):
            by_set = any(key == t or key.startswith((t + ".", t + "[")) for t in touched)
            lines.append(f"{'--set ' if by_set else ''}{key}: {message}" if key else message)
        raise SpecError(lines) from None
