"""Grid expansion, `when:` conditions, coupled values and define-by-run sampling."""

from __future__ import annotations

import optuna
import pytest

from vitscale.distribution_facts import DISTRIBUTION_FACTS
from vitscale.study import (
    Param,
    active_params,
    count_trials,
    grid_points,
    resolve_trial,
    sample_point,
    suggest_point,
    validate_study,
)
from vitscale.study.distributions import DISTRIBUTIONS, register_distribution
from vitscale.study.yamlio import parse


def study(text: str):
    return validate_study(parse("name: t\n" + text), "t.yaml")


@pytest.mark.parametrize(
    ("space", "points"),
    [
        ("{}", 1),
        ("{model.mixer: {grid: [attention, ssog]}}", 2),
        ("{model.mixer: {choice: [attention, ssog]}, model.width: {choice: [32, 64, 128]}}", 6),
        ("{model.depth: {int: [2, 8], step: 2}}", 4),
        ("{model.depth: {int: [1, 4]}, train.epochs: {grid: [1, 2]}}", 8),
        (
            "{model.mixer: {grid: [attention, ssog]}, model.ssog.num_gaussians: {grid: [2, 4, 8], when: {model.mixer: ssog}}}",
            4,
        ),
        (
            "{model.regime: {grid: [discrete, looped, ode]}, model.ode.rtol: {grid: [1.0e-3, 1.0e-4], when: {model.regime: ode}}}",
            4,
        ),
        (
            "{model.regime: {grid: [discrete, looped, ode]}, model.depth: {grid: [2, 4], when: {model.regime: [discrete, looped]}}}",
            5,
        ),
    ],
)
def test_grid_counts(space, points):
    spec = study(f"space: {space}\nsearch: {{seeds: [0, 1, 2]}}")
    assert len(grid_points(spec)) == points
    assert count_trials(spec) == 3 * points


def test_grid_order_first_key_slowest():
    spec = study("space: {model.mixer: {grid: [attention, ssog]}, model.width: {grid: [32, 64]}}")
    assert [(p["model.mixer"], p["model.width"]) for p in grid_points(spec)] == [
        ("attention", 32),
        ("attention", 64),
        ("ssog", 32),
        ("ssog", 64),
    ]


def test_when_on_a_later_key_is_ordered_after_it():
    spec = study(
        "space:\n"
        "  model.ssog.num_gaussians: {grid: [2, 4], when: {model.mixer: ssog}}\n"
        "  model.mixer: {grid: [attention, ssog]}\n"
    )
    points = grid_points(spec)
    assert points == [
        {"model.mixer": "attention"},
        {"model.mixer": "ssog", "model.ssog.num_gaussians": 2},
        {"model.mixer": "ssog", "model.ssog.num_gaussians": 4},
    ]


def test_when_with_several_keys_needs_all():
    spec = study(
        "trial: {model: {regime: ode}}\n"
        "space:\n"
        "  model.ode.solver: {grid: [dopri5, rk4]}\n"
        "  model.ode.step_size: {grid: [0.5, 1.0], when: {model.regime: ode, model.ode.solver: [rk4, euler]}}\n"
    )
    assert grid_points(spec) == [
        {"model.ode.solver": "dopri5"},
        {"model.ode.solver": "rk4", "model.ode.step_size": 0.5},
        {"model.ode.solver": "rk4", "model.ode.step_size": 1.0},
    ]


def test_when_on_a_base_field_without_a_space_parameter():
    spec = study(
        "trial: {model: {mixer: ssog}}\n"
        "space: {model.ssog.num_gaussians: {grid: [1, 2], when: {model.mixer: ssog}}}\n"
    )
    assert grid_points(spec) == [{"model.ssog.num_gaussians": 1}, {"model.ssog.num_gaussians": 2}]


def test_coupled_values_set_several_fields_and_conditions_read_them():
    spec = study(
        "trial: {data: {resolution: 64}}\n"
        "space:\n"
        "  model: {grid: [{width: 192, heads: 3}, {width: 384, heads: 6}]}\n"
        "  train.lr: {grid: [1.0e-3, 5.0e-4], when: {model.width: 384}}\n"
    )
    points = grid_points(spec)
    assert len(points) == 3
    trial = resolve_trial(spec, points[-1], seed=7)
    assert (trial.model.width, trial.model.heads, trial.train.lr, trial.train.seed) == (384, 6, 5e-4, 7)
    assert trial.model.image_size == 64


def test_active_params_follow_the_partial_point():
    spec = study(
        "search: {algorithm: tpe}\n"
        "space:\n"
        "  model.mixer: {choice: [attention, ssog]}\n"
        "  model.ssog.num_gaussians: {int: [1, 8], when: {model.mixer: ssog}}\n"
        "  train.lr: {loguniform: [1.0e-4, 1.0e-2]}\n"
    )
    assert active_params(spec, {"model.mixer": "attention"}) == ["model.mixer", "train.lr"]
    assert active_params(spec, {"model.mixer": "ssog"}) == [
        "model.mixer",
        "model.ssog.num_gaussians",
        "train.lr",
    ]


def test_sample_point_asks_only_active_parameters():
    spec = study(
        "search: {algorithm: random}\n"
        "space:\n"
        "  model.mixer: {choice: [attention, ssog]}\n"
        "  model.ssog.num_gaussians: {int: [1, 8], when: {model.mixer: ssog}}\n"
        "  model: {choice: [{width: 32, heads: 2}, {width: 64, heads: 4}]}\n"
    )
    asked = []

    def first(key: str, param: Param):
        asked.append(key)
        return param.values()[0] if param.is_finite else param.bounds()[0]

    assert sample_point(spec, first) == {"model.mixer": "attention", "model": {"width": 32, "heads": 2}}
    assert asked == ["model.mixer", "model"]


def test_suggest_point_with_optuna_honours_conditions_and_decodes_coupled_values():
    spec = study(
        "search: {algorithm: tpe}\n"
        "space:\n"
        "  model.mixer: {choice: [attention, ssog]}\n"
        "  model.ssog.num_gaussians: {int: [1, 8], when: {model.mixer: ssog}}\n"
        "  model: {choice: [{width: 32, heads: 2}, {width: 64, heads: 4}]}\n"
        "  train.lr: {loguniform: [1.0e-4, 1.0e-2]}\n"
        "  train.warmup_epochs: {uniform: [0, 2], step: 0.5}\n"
    )
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    opt = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0))
    seen = set()
    for _ in range(12):
        trial = opt.ask()
        point = suggest_point(trial, spec, prefix="point/")
        assert ("model.ssog.num_gaussians" in point) == (point["model.mixer"] == "ssog")
        assert point["model"] in ({"width": 32, "heads": 2}, {"width": 64, "heads": 4})
        assert 1e-4 <= point["train.lr"] <= 1e-2
        assert set(trial.params) == {"point/" + k for k in point}
        # Optuna keeps the label; resolve_trial accepts it as well as the value.
        labels = {k.removeprefix("point/"): v for k, v in trial.params.items()}
        assert resolve_trial(spec, labels, 0) == resolve_trial(spec, point, 0)
        seen.add(point["model.mixer"])
        opt.tell(trial, 0.0)
    assert seen == {"attention", "ssog"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (
            {"choice": [1, {"width": 32, "heads": 2}]},
            optuna.distributions.CategoricalDistribution([1, '{"heads":2,"width":32}']),
        ),
        ({"grid": ["a", "b"]}, optuna.distributions.CategoricalDistribution(["a", "b"])),
        ({"int": [2, 8], "step": 2}, optuna.distributions.IntDistribution(2, 8, step=2)),
        ({"int": [1, 64], "log": True}, optuna.distributions.IntDistribution(1, 64, log=True)),
        ({"uniform": [0, 2], "step": 0.5}, optuna.distributions.FloatDistribution(0, 2, step=0.5)),
        ({"loguniform": [1e-4, 1e-2]}, optuna.distributions.FloatDistribution(1e-4, 1e-2, log=True)),
    ],
)
def test_each_distribution_asks_optuna_for_its_own_distribution(given, expected):
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    Param.model_validate(given).suggest(trial, "x")
    assert trial.distributions["x"] == expected


def test_the_registered_distributions_are_the_facts_the_analysis_reads():
    assert list(DISTRIBUTIONS) == list(DISTRIBUTION_FACTS)
    assert all(d.facts is DISTRIBUTION_FACTS[name] for name, d in DISTRIBUTIONS.items())
    with pytest.raises(ValueError, match="'int' is registered twice"):
        register_distribution(DISTRIBUTIONS["int"])
