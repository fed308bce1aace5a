"""Reading YAML safely: SafeLoader plus two fixes, malformed files reported with line and column.

- `1e-3` is a float (YAML 1.2; PyYAML's 1.1 rules would read it as a string).
- A key given twice in one mapping is an error, not a silent overwrite.
The loader is a SafeLoader subclass: only plain data types are ever constructed.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from vitscale.spec.errors import SpecError


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


def _mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, yaml.Node] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
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
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        raise SpecError([f"{source}: {where}invalid YAML: {problem}"]) from None
    except yaml.YAMLError as exc:
        raise SpecError([f"{source}: invalid YAML: {exc}"]) from None


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
