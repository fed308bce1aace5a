"""Reading YAML safely: SafeLoader plus two fixes, malformed files reported with line and column.

- `1e-3` is a float (YAML 1.2; PyYAML's 1.1 rules would read it as a string).
- A key given twice in one mapping is an error, not a silent overwrite.
The loader is a SafeLoader subclass: only plain data types are ever constructed.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from vitscale.study.errors import SpecError

MAX_DEPTH = 100  # nested mappings/lists a file may have; deeper is an error, not a RecursionError


class _Loader(yaml.SafeLoader):
    _depth = 0

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        """Count nesting while composing (the recursive step), so a file of 10,000 `[` is one clear
        error line instead of Python's recursion limit."""
        self._depth += 1
        try:
            if self._depth > MAX_DEPTH:
                raise yaml.composer.ComposerError(
                    None, None, f"nested deeper than {MAX_DEPTH} levels", self.peek_event().start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            raise yaml.constructor.ConstructorError(
                None, None, f"a key must be a scalar, not a {type(key).__name__}", key_node.start_mark
            )
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                key_node.start_mark,
            )
        seen[key] = key_node
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)


def parse(text: str, source: str = "<string>") -> Any:
    """Parse YAML text; a syntax error becomes a SpecError `source: line L, column C: problem`."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = " ".join(" ".join(str(p).split()) for p in (exc.context, exc.problem) if p)
        raise SpecError([f"{source}: {where}invalid YAML: {problem}"]) from None
    except yaml.reader.ReaderError as exc:  # a character YAML forbids (NUL, most control codes)
        before = text[: exc.position]
        where = f"line {before.count(chr(10)) + 1}, column {len(before) - before.rfind(chr(10))}"
        char = exc.character if isinstance(exc.character, int) else ord(exc.character or "\0")
        raise SpecError([f"{source}: {where}: invalid YAML: character #x{char:04x}: {exc.reason}"]) from None
    except yaml.YAMLError as exc:
        raise SpecError([f"{source}: invalid YAML: {' '.join(str(exc).split())}"]) from None


def read(path: Path, source: str | None = None) -> Any:
    """Parse a YAML file; a missing or unreadable file is a SpecError naming it."""
    source = source or str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError([f"{source}: file not found"]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError([f"{source}: cannot read: {exc}"]) from None
    return parse(text, source)


def dump(data: Any) -> str:
    """YAML for people: keys in the order given, block style."""
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, allow_unicode=True)
