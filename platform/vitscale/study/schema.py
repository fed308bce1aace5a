"""JSON Schema of the study and search-space formats, for editors (YAML language servers).

It describes the files as written: `extends:` and `space.include:` are allowed; the rules that
span fields (shapes, conditions, objectives) are checked by `vitscale study validate` only.
"""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter

from vitscale.study.distributions import Param
from vitscale.study.spec import StudySpec, _space_schema

DIALECT = "https://json-schema.org/draft/2020-12/schema"


def study_schema() -> dict[str, Any]:
    """Schema of a study file."""
    schema = StudySpec.model_json_schema(by_alias=True)
    return {
        "$schema": DIALECT,
        "title": "vitscale study",
        **{k: v for k, v in schema.items() if k != "title"},
    }


def space_schema() -> dict[str, Any]:
    """Schema of a search-space file: parameters keyed by dotted trial path, plus `include:`."""
    schema = TypeAdapter(dict[str, Param]).json_schema(by_alias=True)
    _space_schema(schema)
    return {"$schema": DIALECT, "title": "vitscale search space", **schema}
