"""Pydantic errors -> one line per problem, naming the dotted key."""

from __future__ import annotations

import difflib
import re
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

# "heads: 5 does not divide width 64" raised by a model validator: the field is in the message.
_NAMED = re.compile(r"^([A-Za-z_][\w.]*(?:\[\d+\])*): (.+)$", re.S)
_SCALARS = (str, int, float, bool)
# A key part shown bare; anything else (empty, spaces, a colon, quotes) is quoted so it stays visible.
_BARE_KEY = re.compile(r"[^\s:'\"]+")


def dotted(loc: tuple) -> str:
    """('trial', 'model', 'width') -> 'trial.model.width'; list indices as [i]; odd keys quoted (' ')."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            text = str(part)
            out += ("." if out else "") + (text if _BARE_KEY.fullmatch(text) else repr(text))
    return out


def error_items(exc: ValidationError, model: type[BaseModel] | None = None) -> list[tuple[str, str]]:
    """(dotted key, message) per error; `model` (the validated class) lets unknown keys get a suggestion."""
    items = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if p not in ("function-after", "function-before"))
        key = dotted(loc)
        msg = err["msg"].removeprefix("Value error, ").removeprefix("Assertion failed, ")
        if err["type"] == "extra_forbidden":
            msg = _unknown_key(model, loc)
        elif err["type"] == "missing":
            msg = "required key is missing"
        elif err["type"] == "value_error" and (named := _NAMED.match(msg)):
            # A validator that names its own field ("heads: ...") reports under that field.
            name, msg = named.groups()
            if not (key == name or key.endswith("." + name)):
                key = f"{key}.{name}" if key else name
        elif err["type"] != "value_error" and isinstance(err.get("input"), _SCALARS):
            msg = f"{msg} (got {err['input']!r})"
        items.append((key, msg))
    return items


def error_lines(exc: ValidationError, prefix: str = "", model: type[BaseModel] | None = None) -> list[str]:
    """One readable line per error: `prefix: key.path: message`."""
    lines = []
    for key, msg in error_items(exc, model):
        head = ": ".join(p for p in (prefix, key) if p)
        lines.append(f"{head}: {msg}" if head else msg)
    return lines


def _unknown_key(model: type[BaseModel] | None, loc: tuple) -> str:
    """Name the closest known key, or list them all: the fix in the same line."""
    parent = _model_at(model, loc[:-1]) if model is not None and loc else None
    if parent is None:
        return "unknown key (check the spelling; `vitscale study schema` lists the keys)"
    fields = parent.all_fields() if callable(getattr(parent, "all_fields", None)) else parent.model_fields
    known = [f.alias or name for name, f in fields.items()]
    close = difflib.get_close_matches(str(loc[-1]), known, n=2, cutoff=0.6)
    if close:
        return f"unknown key; did you mean {' or '.join(map(repr, close))}?"
    return f"unknown key; known keys: {', '.join(known)}"


def unwrap_optional(ann: Any) -> Any:
    """`X | None` -> X; other annotations unchanged."""
    if get_origin(ann) in (Union, types.UnionType):
        args = [a for a in get_args(ann) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return ann


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel] | None:
    """The pydantic model class found at `loc` below `model` (through optionals, lists, dicts)."""
    ann: Any = model
    for part in loc:
        ann = unwrap_optional(ann)
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            fields = ann.all_fields() if callable(getattr(ann, "all_fields", None)) else ann.model_fields
            field = next(
                (f for name, f in fields.items() if part in (name, f.alias)),
                None,
            )
            if field is None:
                return None
            ann = field.annotation
        elif get_origin(ann) in (list, dict) and get_args(ann):
            ann = get_args(ann)[-1]
        else:
            return None
    ann = unwrap_optional(ann)
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
