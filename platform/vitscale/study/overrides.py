"""`--set path=value` overrides, applied to the raw study mapping after `extends:`.

The path is dotted from the top of the study (`trial.train.epochs`, `search.num_samples`,
`objectives[0].mode` or `objectives.0.mode`); below `space` the rest of the path is one
parameter key (`space.model.width`). The value is parsed as YAML, so `2` is an int, `1e-3` a float,
`null` is None (and under `space` removes the parameter) and `{choice: [32]}` a mapping.
The result is then validated exactly like the file.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from vitscale.study.errors import SpecError
from vitscale.study.yamlio import parse
from vitscale.validation import dotted

_INDEX = re.compile(r"\[(\d+)\]")


STUDY_EXAMPLE = "trial.train.epochs=2"  # a valid `--set` of a study, for the hint


def parse_override(text: str, example: str = STUDY_EXAMPLE) -> tuple[list[str | int], Any]:
    """'trial.train.epochs=2' -> (['trial', 'train', 'epochs'], 2); `example` is the hint's PATH=VALUE."""
    path, sep, raw = text.partition("=")
    path = path.strip()
    if not sep or not path:
        raise SpecError([f"--set {text}: expected PATH=VALUE, e.g. --set {example}"])
    parts = split_path(path)
    if parts == ["space", "include"] or parts == ["extends"]:
        raise SpecError([f"--set {path}: files are combined when the study is read; edit the study file"])
    if any(p == "" for p in parts):
        raise SpecError([f"--set {text}: empty key in path {path!r}"])
    try:
        value = parse(raw, source=f"--set {path}") if raw.strip() else None
    except SpecError as exc:
        raise SpecError([f"--set {path}: invalid value {raw!r}: {exc.lines[0].split(': ', 1)[-1]}"]) from None
    return parts, value


def split_path(path: str) -> list[str | int]:
    """Dotted path -> keys; `space.` swallows the rest as one key; [i] and numeric parts index lists."""
    head, dot, rest = path.partition(".")
    if head == "space" and dot:
        return ["space", rest]
    parts: list[str | int] = []
    for piece in _INDEX.sub(r".\1", path).split("."):
        parts.append(int(piece) if piece.isascii() and piece.isdigit() else piece)  # not "²"
    return parts


def apply_overrides(
    raw: dict, overrides: Iterable[str], example: str = STUDY_EXAMPLE
) -> tuple[dict, list[str]]:
    """Apply each override in order; returns the new mapping and the dotted keys it touched."""
    touched = []
    for text in overrides:
        parts, value = parse_override(text, example)
        _assign(raw, parts, value, text)
        touched.append(dotted(tuple(parts)))
    return raw, touched


def _assign(raw: dict, parts: list[str | int], value: Any, text: str) -> None:
    node: Any = raw
    for i, part in enumerate(parts[:-1]):
        nxt = parts[i + 1]
        if isinstance(node, dict):
            child = node.get(part)
            if child is None:
                child = node[part] = [] if isinstance(nxt, int) else {}
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            child = node[part]
        else:
            raise SpecError([f"--set {text}: {_where(parts, i)} cannot be indexed by {part!r}"])
        node = child
    last = parts[-1]
    if isinstance(node, dict):
        if value is None and parts[0] == "space" and len(parts) == 2:
            node.pop(last, None)  # space.<key>=null removes the parameter
        else:
            node[last] = value
    elif isinstance(node, list) and isinstance(last, int) and last <= len(node):
        node[last : last + 1] = [value]
    else:
        raise SpecError([f"--set {text}: {_where(parts, len(parts) - 1)} is not a mapping"])


def _where(parts: list[str | int], i: int) -> str:
    return ".".join(str(p) for p in parts[:i]) or "the study"
