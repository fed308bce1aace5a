"""Regressions found by fuzzing (tests/fuzz): odd YAML values are reported, never crash the validator."""

from __future__ import annotations

import pytest

from vitscale.study import SpecError, label, load_study, validate_study
from vitscale.study.yamlio import MAX_DEPTH, parse
from vitscale.train.config import TrialConfig

BASE = {"name": "x", "trial": {"data": {"resolution": 16}, "model": {"patch_size": 4}}}


def problems(raw: dict) -> list[str]:
    with pytest.raises(SpecError) as info:
        validate_study(raw, "s.yaml")
    return info.value.lines


@pytest.mark.parametrize(
    ("section", "value"),
    [
        ("model", -1),
        ("model", "abc"),
        ("model", [1, "x"]),
        ("data", [1, "x"]),
        ("data", "abc"),
        ("data", 3.5),
    ],
)
def test_section_that_is_not_a_mapping_is_a_type_error(section, value):
    """`_image_size_from_resolution` lets Pydantic report it (was TypeError / AttributeError)."""
    raw = {**BASE, "trial": {**BASE["trial"], section: value}}
    assert problems(raw) == [
        f"s.yaml: trial.{section}: Input should be a valid dictionary or instance of "
        f"{'ModelConfig' if section == 'model' else 'DataConfig'}"
        + (f" (got {value!r})" if not isinstance(value, list) else "")
    ]


def test_trial_config_before_validator_passes_any_value_through():
    for value in (None, 1, "x", [1], {"data": 5, "model": {}}, {"data": {"resolution": 8}, "model": 3}):
        # untouched (no exception, no rewrite): Pydantic reports the type under its own key
        assert TrialConfig._image_size_from_resolution(value) is value


def test_label_of_mappings_with_mixed_key_types():
    """Was TypeError: '<' not supported between 'int' and 'str' (json sort_keys)."""
    assert label({1: "a", "x": "b"}) == label({"x": "b", 1: "a"})
    assert label({"width": 64, "heads": 2}) == '{"heads":2,"width":64}'  # stored Optuna labels unchanged
    lines = problems({"name": "x", "space": {"model": {"choice": [{1: "a", "x": "b"}, [1, "x"]]}}})
    assert lines and all(line.startswith("s.yaml: space.model") for line in lines)


def test_deep_nesting_is_one_line(write):
    path = write("deep.yaml", "name: x\ndescription: " + "[" * 20000 + "]" * 20000 + "\n")
    with pytest.raises(SpecError) as info:
        load_study(path)
    assert info.value.lines == [
        f"{path}: line 2, column {MAX_DEPTH + 13}: invalid YAML: nested deeper than {MAX_DEPTH} levels"
    ]
    assert parse("a: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))  # the limit itself is fine


def test_control_character_is_one_line_with_its_position():
    with pytest.raises(SpecError) as info:
        parse("name: x\ndesc\x07: y\n", "s.yaml")
    assert info.value.lines == [
        "s.yaml: line 2, column 5: invalid YAML: character #x0007: special characters are not allowed"
    ]


@pytest.mark.parametrize("text", ["? [1]\n: 2\n", "? {a: 1}\n: 2\n", "? !!set {a, b}\n: x\n"])
def test_unhashable_key_is_invalid_yaml(text):
    with pytest.raises(SpecError) as info:
        parse(text, "s.yaml")
    assert "invalid YAML: a key must be a scalar" in info.value.lines[0]


def test_huge_int_ranges_are_counted_not_listed():
    """Was MemoryError: `int: [1, 10**12]` became a list before the grid limit was checked."""
    lines = problems({"name": "x", "space": {"train.epochs": {"int": [1, 10**12]}}})
    assert lines == ["s.yaml: space: the grid has more than 100000 points; narrow it or use a sampler"]
    lines = problems({"name": "x", "space": {"model": {"int": [1, 10**12]}, "model.width": {"choice": [32]}}})
    assert lines[0].startswith("s.yaml: space.model: model is a section")


@pytest.mark.parametrize("key", [" ", "", "a: b", "\x85  "])
def test_a_blank_or_odd_key_is_quoted_in_the_problem_line(key):
    """A space-only key (YAML folds '\\x85  ' to ' ') printed as 's.yaml:  : ...', naming nothing."""
    lines = problems({**BASE, "trial": {**BASE["trial"], key: 1}})
    assert lines[0].startswith(f"s.yaml: trial.{key!r}: unknown key"), lines


def test_a_searched_key_under_an_unset_optional_section_is_validated_not_a_crash():
    """`space: {train.distill.weight: ...}` with no trial.train.distill (None) was a TypeError in set_in."""
    raw = {**BASE, "space": {"train.distill.weight": {"grid": [0.0, 0.3]}}}
    assert problems(raw) == [
        "s.yaml: trial.train.distill.teacher: required when weight or logit_weight > 0 (a checkpoint, "
        "MLflow run id, models:/ URI or {best_of: STUDY}); weight 0 trains from scratch "
        "(at grid point train.distill.weight=0.3)"
    ]


def test_a_when_on_one_value_of_a_sampled_huge_range_is_active():
    """The checker samples 64 values of a 10^12-wide range; the value a when: waits for is one of them."""
    space = {
        "data.num_train": {"int": [10, 10**12]},
        "train.lr": {"loguniform": [1e-4, 1e-2], "when": {"data.num_train": 777}},
    }
    spec = validate_study(
        {**BASE, "space": space, "search": {"algorithm": "random", "num_samples": 4}}, "s.yaml"
    )
    assert set(spec.space) == {"data.num_train", "train.lr"}
    space["train.lr"]["when"] = {"data.num_train": 5}  # outside the range: never active, still said
    assert problems({**BASE, "space": space, "search": {"algorithm": "random", "num_samples": 4}}) == [
        "s.yaml: space.train.lr: never active: its when: {data.num_train: 5} never holds"
    ]
