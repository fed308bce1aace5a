"""Mutations of study and search-space files, drawn by Hypothesis: what a user's typo can make.

Structural mutations work on the parsed mapping (delete a key, replace a value by one of another
YAML type, add an unknown key, mix types in a list, break `extends`/`include`); textual ones on
the YAML text (duplicate a line, insert unicode or control characters, deep brackets, truncate).
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from fuzz_support import keys, scalars, yaml_values
from hypothesis import strategies as st

Path_ = tuple[Any, ...]

BROKEN_TARGETS = [
    "missing.yaml",
    "../nowhere/base.yaml",
    "",
    ".",
    "..",
    "/dev/null",
    "/",
    "binary.bin",
    "notyaml.yaml",
    "list.yaml",
    "self",  # replaced by the file's own name: a cycle
    "../search_spaces/recipe.yaml",
    "../studies/quickstart.yaml",
]
FIELDS = [
    "model",
    "model.width",
    "model.heads",
    "model.mixer",
    "model.ode",
    "model.ode.rtol",
    "train.epochs",
    "train.lr",
    "data.resolution",
    "model.ssog.num_gaussians",
    "train.betas",
    "x.y",
    "model.image_size",
]
ODD_TEXT = ["\x00", "\x07", "\x1b[31m", "\ufeff", "\u202e", "\ud7ff", "é", "😀", "\t", "\r", "\u2028", "%"]


def paths(data: Any, prefix: Path_ = ()) -> list[Path_]:
    """Every key path into nested mappings and lists (the root is ())."""
    out = [prefix]
    if isinstance(data, dict):
        for key, value in data.items():
            out += paths(value, (*prefix, key))
    elif isinstance(data, list):
        for i, value in enumerate(data):
            out += paths(value, (*prefix, i))
    return out


def _parent(data: Any, path: Path_) -> Any:
    for part in path[:-1]:
        data = data[part]
    return data


@st.composite
def params(draw: st.DrawFn) -> dict:
    """A search-space parameter, often almost right: the distributions' own validators get fuzzed."""
    number = st.integers(-5, 10**13) | st.sampled_from([0, 1, 2**63, 10**400]) | st.floats()
    kind = draw(st.sampled_from(["choice", "grid", "int", "uniform", "loguniform"]))
    if kind in ("choice", "grid"):
        value = draw(st.lists(scalars | yaml_values | number, min_size=0, max_size=5))
    else:
        value = draw(st.lists(number, min_size=2, max_size=2) | yaml_values)
    param: dict = {kind: value}
    for option, strategy in (("step", number), ("log", st.booleans() | scalars), ("when", yaml_values)):
        if draw(st.integers(0, 3)) == 0:
            param[option] = draw(strategy)
    if draw(st.integers(0, 4)) == 0:
        param["when"] = {draw(st.sampled_from(FIELDS)): draw(scalars | st.lists(scalars, max_size=3))}
    return param


def mutate_structure(draw: st.DrawFn, data: Any, own_name: str) -> Any:
    """One structural mutation of parsed YAML `data`; returns the new data."""
    data = copy.deepcopy(data)
    op = draw(
        st.sampled_from(
            ["delete", "replace", "add_key", "mix_list", "extends", "include", "wrap", "scalar", "param"]
        )
    )
    where = draw(st.sampled_from(paths(data)))
    if op == "scalar":
        return draw(yaml_values)
    if op == "extends" and isinstance(data, dict):
        target = draw(st.sampled_from(BROKEN_TARGETS) | yaml_values)
        data["extends"] = own_name if target == "self" else target
        return data
    if op == "param" and isinstance(data, dict):
        is_study = "name" in data or "trial" in data
        space = data.setdefault("space", {}) if is_study else data
        if isinstance(space, dict):
            space[draw(st.sampled_from(FIELDS) | keys)] = draw(params())
        return data
    if op == "include" and isinstance(data, dict):
        target = draw(st.sampled_from(BROKEN_TARGETS) | yaml_values)
        target = own_name if target == "self" else target
        space = data["space"] if isinstance(data.get("space"), dict) else data
        space["include"] = draw(st.sampled_from([target, [target], [target, target]]))
        return data
    if where == ():
        return draw(yaml_values) if op in ("replace", "wrap") else data
    parent, last = _parent(data, where), where[-1]
    if op == "delete":
        del parent[last]
    elif op == "replace":
        parent[last] = draw(yaml_values)
    elif op == "wrap":
        parent[last] = draw(st.sampled_from([[parent[last]], {"x": parent[last]}, [[[[parent[last]]]]]]))
    elif op == "add_key":
        target = parent[last]
        if isinstance(target, dict):
            target[draw(keys)] = draw(yaml_values)
        elif isinstance(parent, dict):
            parent[draw(keys)] = draw(yaml_values)
    elif op == "mix_list":
        target = parent[last]
        if isinstance(target, list):
            target.insert(draw(st.integers(0, len(target))), draw(scalars | yaml_values))
        else:
            parent[last] = [target, draw(scalars), draw(scalars)]
    return data


def dump(data: Any) -> str:
    return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, default_flow_style=None)


def mutate_text(draw: st.DrawFn, text: str) -> str:
    """One textual mutation: what a structure cannot express (duplicates, bad bytes, syntax)."""
    lines = text.splitlines(keepends=True) or [""]
    op = draw(st.sampled_from(["duplicate_line", "insert", "brackets", "truncate", "indent", "anchor"]))
    i = draw(st.integers(0, len(lines) - 1))
    if op == "duplicate_line":
        lines.insert(i, lines[i])
    elif op == "insert":
        line = lines[i]
        at = draw(st.integers(0, len(line)))
        lines[i] = line[:at] + draw(st.sampled_from(ODD_TEXT) | st.text(max_size=4)) + line[at:]
    elif op == "brackets":
        depth = draw(st.sampled_from([50, 99, 100, 101, 1000, 20000]))
        lines.insert(i, f"deep: {'[' * depth}1{']' * depth}\n")
    elif op == "truncate":
        return text[: draw(st.integers(0, len(text)))]
    elif op == "indent":
        lines[i] = draw(st.sampled_from(["  ", "\t", " "])) + lines[i]
    elif op == "anchor":
        lines.insert(
            i, "bomb: &a [x, x, x, x, x, x, x, x, x]\nbomb2: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
        )
    return "".join(lines)


@st.composite
def mutated(draw: st.DrawFn, original: str, own_name: str) -> str:
    """The text of a mutated file: up to 3 structural mutations, then up to 2 textual ones (at least
    one mutation in all)."""
    structural = draw(st.integers(0, 3))
    data = yaml.safe_load(original)
    for _ in range(structural):
        data = mutate_structure(draw, data, own_name)
    text = dump(data) if structural else original  # the original keeps its comments and flow style
    for _ in range(draw(st.integers(0 if structural else 1, 2))):
        text = mutate_text(draw, text)
    return text
