"""The JSON Schema (for editors) accepts every shipped file and rejects unknown keys."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from vitscale.study import space_schema, study_schema
from vitscale.study.yamlio import read

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def study_validator():
    schema = study_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("path", sorted((ROOT / "studies").glob("*.yaml")), ids=lambda p: p.name)
def test_schema_accepts_shipped_studies(study_validator, path):
    assert [e.message for e in study_validator.iter_errors(read(path))] == []


@pytest.mark.parametrize("path", sorted((ROOT / "search_spaces").glob("*.yaml")), ids=lambda p: p.name)
def test_schema_accepts_shipped_search_spaces(path):
    validator = jsonschema.Draft202012Validator(space_schema())
    assert [e.message for e in validator.iter_errors(read(path))] == []


@pytest.mark.parametrize(
    "doc",
    [
        {"name": "x", "trial": {"model": {"widht": 64}}},
        {"name": "x", "colour": "blue"},
        {"name": "x", "space": {"model.width": {"choice": [32], "grid": [64]}}},
        {"name": "x", "space": {"model.width": {"between": [32, 64]}}},
        {"name": "x", "search": {"algorithm": "bayes"}},
        {"trial": {}},
    ],
)
def test_schema_rejects_malformed(study_validator, doc):
    assert list(study_validator.iter_errors(doc))


def test_schema_allows_loader_keys(study_validator):
    doc = {"name": "x", "extends": "base.yaml", "space": {"include": ["a.yaml"], "model.width": None}}
    assert list(study_validator.iter_errors(doc)) == []
