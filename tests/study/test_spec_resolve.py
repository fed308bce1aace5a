"""Trial resolution, flattening, replicate keys and spec hashes."""

from __future__ import annotations

import pytest

from vitscale.study import (
    SpecError,
    config_key,
    describe_point,
    flatten,
    grid_points,
    resolve_trial,
    spec_hash,
    validate_study,
)
from vitscale.study.yamlio import parse

SPEC = """
name: r
trial:
  model: {regime: ode, width: 64, heads: 4, patch_size: 4}
  data: {dataset: digits, resolution: 32}
  train: {epochs: 3, seed: 5}
space:
  model.mixer: {grid: [attention, ssog]}
  data.resolution: {grid: [32, 64]}
  model: {grid: [{width: 32, heads: 2}, {width: 64, heads: 4, ode: {rtol: 1.0e-4}}]}
search: {seeds: [0, 1]}
"""


@pytest.fixture
def spec():
    return validate_study(parse(SPEC), "r.yaml")


def test_resolve_applies_point_coupled_values_and_seed(spec):
    point = {
        "model.mixer": "ssog",
        "data.resolution": 64,
        "model": {"width": 64, "heads": 4, "ode": {"rtol": 1e-4}},
    }
    trial = resolve_trial(spec, point, seed=1)
    assert trial.model.mixer == "ssog" and trial.model.ode.rtol == 1e-4
    assert trial.data.resolution == 64 and trial.model.image_size == 64  # the model follows the data
    assert trial.train.seed == 1 and trial.train.epochs == 3
    assert spec.trial.model.mixer == "attention"  # the base is untouched


def test_seeds_default_to_the_base_seed():
    spec = validate_study({"name": "s", "trial": {"train": {"seed": 5}}})
    assert spec.search.seeds == [5]
    assert resolve_trial(spec, {}, 5).train.seed == 5


def test_resolve_rejects_a_bad_point(spec):
    with pytest.raises(SpecError, match=r"trial at model.heads=3: model.heads: 3 does not divide width 64"):
        resolve_trial(spec, {"model.heads": 3}, 0)


def test_flatten_gives_dotted_scalars(spec):
    flat = flatten(resolve_trial(spec, grid_points(spec)[0], 0))
    assert flat["model.mixer"] == "attention" and flat["model.ode.solver"] == "dopri5"
    assert flat["train.betas"] == "[0.9, 0.999]"
    assert all(v is None or isinstance(v, bool | int | float | str) for v in flat.values())


def test_config_key_groups_replicates(spec):
    a, b = grid_points(spec)[:2]
    assert config_key(resolve_trial(spec, a, 0)) == config_key(resolve_trial(spec, a, 1))
    assert config_key(resolve_trial(spec, a, 0)) != config_key(resolve_trial(spec, b, 0))


def test_spec_hash_is_stable_and_ignores_the_description(spec):
    same = validate_study(parse(SPEC + "description: other words\n"), "r.yaml")
    other = validate_study(parse(SPEC.replace("epochs: 3", "epochs: 4")), "r.yaml")
    assert spec_hash(spec) == spec_hash(same) != spec_hash(other)
    assert len(spec_hash(spec)) == 16


def test_describe_point():
    assert describe_point({"model.mixer": "ssog", "model": {"width": 192, "heads": 3}}, 2) == (
        "ssog · w192 · h3 · s2"
    )
    assert describe_point({"model.mixer": "ssog", "train.lr": 3e-3, "model.ode.solver": "euler"}, 0) == (
        "ssog · lr=0.003 · euler · s0"
    )
    # A sampled point: the names of its variants and its Optuna trial number (values: the params).
    assert (
        describe_point({"model.mixer": "ssog", "train.lr": 3e-3, "model.width": 64}, 1, 7) == "ssog · #7 · s1"
    )
    assert describe_point({}) == "base"


def test_filled_defaults():
    spec = validate_study(
        parse(
            "name: d\ntrial: {train: {epochs: 7}}\nscheduler: {type: asha}\nsearch: {algorithm: tpe}\n"
            "space: {train.lr: {loguniform: [1.0e-4, 1.0e-2]}}"
        )
    )
    assert spec.tracking.experiment == "d" and spec.scheduler.max_t == 7
    assert (
        spec.search.num_samples == 16
        and spec.objectives[0].metric == "val_top1"
        and spec.objectives[0].mode == "max"
    )
    spec = validate_study(parse("name: e\nscheduler: {type: asha}\nspace: {train.epochs: {grid: [2, 9]}}"))
    assert spec.scheduler.max_t == 9
