"""`--set path=value`: parsing, application after extends, validation like the file."""

from __future__ import annotations

import pytest

from vitscale.study import SpecError, apply_overrides, count_trials, load_study, parse_override

BASE = """
name: base
trial: {train: {epochs: 10, lr: 1.0e-3}}
space:
  model.mixer: {grid: [attention, ssog]}
  model.width: {grid: [32, 64]}
objectives: [{metric: val_top1, mode: max}]
"""


@pytest.mark.parametrize(
    ("text", "path", "value"),
    [
        ("trial.train.epochs=2", ["trial", "train", "epochs"], 2),
        ("trial.train.lr=1e-3", ["trial", "train", "lr"], 1e-3),
        ("trial.train.amp=false", ["trial", "train", "amp"], False),
        ("trial.train.grad_clip=null", ["trial", "train", "grad_clip"], None),
        ("trial.data.root=/data/cifar100", ["trial", "data", "root"], "/data/cifar100"),
        ("tracking.uri=sqlite:///x.db", ["tracking", "uri"], "sqlite:///x.db"),
        ("search.seeds=[0, 1, 2]", ["search", "seeds"], [0, 1, 2]),
        ("space.model.width={choice: [32]}", ["space", "model.width"], {"choice": [32]}),
        ("objectives[0].mode=min", ["objectives", 0, "mode"], "min"),
        ("objectives.0.mode=min", ["objectives", 0, "mode"], "min"),
    ],
)
def test_parse_override(text, path, value):
    assert parse_override(text) == (path, value)


@pytest.mark.parametrize(
    "text", ["trial.train.epochs", "=3", "a..b=1", "extends=x.yaml", "space.include=x.yaml"]
)
def test_malformed_override(text):
    with pytest.raises(SpecError, match=r"^--set "):
        parse_override(text)


def test_apply_overrides_creates_and_replaces():
    raw = {"space": {"model.width": {"grid": [1]}}}
    out, touched = apply_overrides(
        raw, ["trial.train.epochs=2", "space.model.width=null", "space.train.lr={choice: [0.1]}"]
    )
    assert out == {"space": {"train.lr": {"choice": [0.1]}}, "trial": {"train": {"epochs": 2}}}
    assert touched == ["trial.train.epochs", "space.model.width", "space.train.lr"]


def test_overrides_apply_after_extends(write):
    write("base.yaml", BASE)
    child = write("child.yaml", "name: child\nextends: base.yaml\ntrial: {train: {epochs: 5}}\n")
    assert load_study(child).trial.train.epochs == 5
    spec = load_study(
        child, ["trial.train.epochs=2", "space.model.width={grid: [32]}", "search.seeds=[0, 1]"]
    )
    assert spec.trial.train.epochs == 2 and spec.trial.train.lr == 1e-3
    assert count_trials(spec) == 2 * 1 * 2


def test_overrides_are_validated_like_the_file(write):
    path = write("base.yaml", BASE)
    with pytest.raises(SpecError) as info:
        load_study(path, ["trial.train.epochs=0", "trial.train.epoch=2"])
    assert info.value.lines == [
        f"{path}: trial.train.epochs: Input should be greater than or equal to 1 (got 0) (set by --set)",
        f"{path}: trial.train.epoch: unknown key; did you mean 'epochs'? (set by --set)",
    ]
    with pytest.raises(SpecError) as info:
        load_study(path, ["space.model.heads={grid: [3]}"])
    assert info.value.lines == [
        f"{path}: space.model.heads: heads 3 does not divide width 32 "
        "(at model.width=32, model.heads=3) (set by --set)"
    ]
    with pytest.raises(SpecError, match=r"--set trial.train.epochs.x=1: trial.train.epochs is not a mapping"):
        load_study(path, ["trial.train.epochs.x=1"])
