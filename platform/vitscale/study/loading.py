"""Study and search-space files: `extends:` and `include:` resolved, overrides applied, validated.

- `extends: base.yaml` (relative to the file): the base is read (its own extends and includes
  resolved), then this file is merged over it: mappings merge key by key, lists and scalars
  replace, and each `space` parameter replaces the base's whole (`null` removes it). A study that
  extends another must set its own `name`.
- `space: {include: x.yaml | [x.yaml, y.yaml], ...}`: parameters of those search-space files
  (relative to the including file), merged in order, then this file's own parameters over them.
- A search-space file is a mapping of parameters (and optionally `include:`), nothing else.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vitscale.study import yamlio
from vitscale.study.check_space import check_structure
from vitscale.study.checks import check_study
from vitscale.study.distributions import Param
from vitscale.study.errors import Problem, SpecError
from vitscale.study.overrides import apply_overrides
from vitscale.study.spec import StudySpec
from vitscale.validation import error_items


def _show(path: Path) -> str:
    """A path as the user would write it: relative to the working directory when below it."""
    text = os.path.normpath(str(path))
    if os.path.isabs(text):
        rel = os.path.relpath(text)
        return text if rel.startswith("..") else rel
    return text


def _read_mapping(path: Path, what: str) -> dict:
    data = yamlio.read(path, _show(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise SpecError([f"{_show(path)}: a {what} file is a mapping of keys, not a {type(data).__name__}"])
    return data


def read_space(path: Path, _chain: Sequence[Path] = ()) -> dict[str, Any]:
    """A search-space file's parameters (raw), with its own includes merged."""
    params = _read_mapping(path, "search-space")
    return _with_includes(params, path, [*_chain, path.resolve()], "include")


def _with_includes(params: dict, path: Path, chain: list[Path], key: str) -> dict[str, Any]:
    includes = params.pop("include", None)
    if includes is None:
        return _merge_space({}, params)  # a null parameter means "none": drop it
    if isinstance(includes, str):
        includes = [includes]
    if not isinstance(includes, list) or not all(isinstance(i, str) for i in includes):
        raise SpecError([f"{_show(path)}: {key}: expected a file path or a list of them"])
    merged: dict[str, Any] = {}
    for name in includes:
        target = path.parent / name
        if target.resolve() in chain:
            cycle = " -> ".join(_show(p) for p in [*chain, target.resolve()])
            raise SpecError([f"{_show(path)}: {key}: include cycle {cycle}"])
        if not target.is_file():
            raise SpecError([f"{_show(path)}: {key}: file not found: {_show(target)}"])
        merged = _merge_space(merged, read_space(target, chain))
    return _merge_space(merged, params)


def _merge_space(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = value
    return out


def merge(base: dict, over: dict, path: tuple[str, ...] = ()) -> dict:
    """`over` on top of `base`: mappings merge recursively; `space` merges per parameter."""
    if path == ("space",):
        return _merge_space(base, over)
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value, (*path, str(key)))
        else:
            out[key] = value
    return out


def read_study(path: Path | str, _chain: Sequence[Path] = ()) -> tuple[dict[str, Any], list[str]]:
    """The raw study mapping with extends and includes applied, and the files it came from."""
    path = Path(path)
    here = path.resolve()
    raw = _read_mapping(path, "study")
    space = raw.get("space")
    if isinstance(space, dict):
        raw["space"] = _with_includes(dict(space), path, [here], "space.include")
    files = [_show(path)]
    parent = raw.pop("extends", None)
    if parent is None:
        return raw, files
    if not isinstance(parent, str):
        raise SpecError([f"{_show(path)}: extends: expected the path of a study file"])
    target = path.parent / parent
    chain = [*_chain, here]
    if target.resolve() in chain:
        cycle = " -> ".join(_show(p) for p in [*chain, target.resolve()])
        raise SpecError([f"{_show(path)}: extends: cycle {cycle}"])
    if not target.is_file():
        raise SpecError([f"{_show(path)}: extends: file not found: {_show(target)}"])
    if "name" not in raw:
        raise SpecError([f"{_show(path)}: name: required: a study that extends another needs its own name"])
    base, base_files = read_study(target, chain)
    return merge(base, raw), files + base_files


def load_study(path: Path | str, overrides: Iterable[str] = ()) -> StudySpec:
    """Read, resolve, override and validate a study file. Raises SpecError with every problem."""
    raw, _ = read_study(path)
    raw, touched = apply_overrides(raw, overrides)
    return validate_study(raw, _show(Path(path)), touched)


def validate_study(raw: Any, source: str = "", touched: Sequence[str] = ()) -> StudySpec:
    """Validate a raw study mapping (extends/includes already applied); all problems at once."""
    if not isinstance(raw, dict):
        raise SpecError([f"{source or 'study'}: a study is a mapping (name:, trial:, space:, ...)"])
    problems: list[Problem] = []
    if raw.get("extends") is not None:
        problems.append(
            Problem("extends", "resolved when a file is read (load_study); it cannot be set here")
        )
    bad: set[str] = set()
    removed: set[str] = set()  # space parameters Pydantic rejected; the others are still checked
    try:
        spec: StudySpec | None = StudySpec.model_validate(raw)
    except ValidationError as exc:
        problems += [Problem(k, m) for k, m in error_items(exc, StudySpec)]
        locs = [e["loc"] for e in exc.errors() if e["loc"]]
        bad = {str(loc[0]) for loc in locs}
        space_locs = [loc for loc in locs if loc[0] == "space"]
        if space_locs and all(len(loc) > 1 for loc in space_locs) and isinstance(raw.get("space"), dict):
            removed = {str(loc[1]) for loc in space_locs}
            bad.discard("space")
        spec = _partial(raw, bad, removed)
    if spec is not None:
        problems += check_study(spec, skip=bad, removed=removed)
    if problems:
        raise SpecError.from_problems(_from_set(_unique(problems), touched), source)
    return spec


def load_space(path: Path | str) -> dict[str, Param]:
    """Read and check a search-space file on its own: structure, paths, values, `when:` references.

    Rules that need a base trial (shapes, never-active, mixer-only fields) run in the studies
    that include it.
    """
    from pydantic import TypeAdapter

    path = Path(path)
    raw = read_space(path)
    try:
        space = TypeAdapter(dict[str, Param]).validate_python(raw)
    except ValidationError as exc:
        raise SpecError.from_problems((Problem(k, m) for k, m in error_items(exc)), _show(path)) from None
    problems = check_structure(space, prefix="")
    if problems:
        raise SpecError.from_problems(problems, _show(path))
    return space


def is_space_file(raw: Any) -> bool:
    """A search-space file has parameter paths at the top, never study keys such as name or trial."""
    return isinstance(raw, dict) and not (set(raw) & set(StudySpec.model_fields))


def _partial(raw: dict, bad: set[str], removed: set[str]) -> StudySpec | None:
    """The spec with its invalid sections replaced by defaults (and its invalid space parameters
    left out), so the other checks can still run."""
    good = {k: v for k, v in raw.items() if k not in bad}
    if removed:
        good["space"] = {k: v for k, v in raw["space"].items() if k not in removed}
    if "name" in bad or "name" not in good:
        good["name"] = "placeholder"
    try:
        return StudySpec.model_validate(good)
    except ValidationError:
        return None


def _unique(problems: list[Problem]) -> list[Problem]:
    return list(dict.fromkeys(problems))


def _from_set(problems: list[Problem], touched: Sequence[str]) -> list[Problem]:
    """Mark problems in keys that a --set override wrote."""
    out = []
    for p in problems:
        hit = any(p.key == t or p.key.startswith((t + ".", t + "[")) for t in touched)
        out.append(Problem(p.key, p.message + " (set by --set)") if hit else p)
    return out
