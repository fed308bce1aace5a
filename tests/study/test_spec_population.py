"""`scheduler: {type: pbt | pb2}`: accepted in an ordinary study, refused (one line naming the key,
exit 2) where population-based training makes no sense, and in the JSON Schema."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

from vitscale.cli import main
from vitscale.study import SpecError, study_schema, validate_study
from vitscale.study.population import population_mutations
from vitscale.study.yamlio import parse

ROOT = Path(__file__).resolve().parents[2]
ORDINARY = """name: x
trial:
  model: {width: 16, depth: 1, heads: 2, patch_size: 4}
  data: {dataset: digits, resolution: 16}
  train: {epochs: 4, batch_size: 64}
space:
  train.lr: {loguniform: [1.0e-3, 1.0e-2]}
  train.weight_decay: {choice: [0.0, 0.05]}
  model.width: {choice: [16, 32]}
search: {algorithm: random, num_samples: 4}
"""


def _spec(extra: str):
    """ORDINARY with the top-level sections of `extra` in place of its own."""
    return validate_study({**parse(ORDINARY, "x.yaml"), **parse(extra, "x.yaml")}, "x.yaml")


def _problems(extra: str) -> list[str]:
    with pytest.raises(SpecError) as info:
        _spec(extra)
    return info.value.lines


@pytest.mark.parametrize("kind", ["pbt", "pb2"])
def test_validate_accepts_a_population_scheduler_in_an_ordinary_study(write, capsys, kind):
    path = write("pbt.yaml", ORDINARY + f"scheduler: {{type: {kind}, perturbation_interval: 1}}\n")
    with pytest.raises(SystemExit) as info:
        main(["study", "validate", str(path)])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    assert (info.value.code or 0, err) == (0, "")
    assert out.startswith(f"OK {path}: study x (train, random): 4 trials")


def test_mutations_default_to_the_space_entries_a_trained_model_can_carry_on_with():
    assert list(population_mutations(_spec("scheduler: {type: pbt}"))) == ["train.lr", "train.weight_decay"]
    assert list(population_mutations(_spec("scheduler: {type: pb2}"))) == ["train.lr"]  # ranges only
    given = "scheduler: {type: pbt, hyperparam_mutations: {train.label_smoothing: {uniform: [0.0, 0.2]}}}"
    assert list(population_mutations(_spec(given))) == ["train.label_smoothing"]


REFUSED = [
    (
        "scheduler: {type: pbt}\nsearch: {algorithm: random, num_samples: 4, max_concurrent_trials: 2}",
        "search.max_concurrent_trials",
        "they would never meet",
    ),
    ("scheduler: {type: pbt}\nsearch: {algorithm: tpe}", "search.algorithm", "learns from finished trials"),
    ("scheduler: {type: pbt}\nsearch: {algorithm: random, seeds: [0, 1]}", "search.seeds", "give one seed"),
    (
        "scheduler: {type: pbt}\nsearch: {algorithm: random, budget: {train_flops: 1.0e12}}",
        "search.budget",
        "fixed population",
    ),
    (
        "scheduler: {type: pbt, hyperparam_mutations: {model.width: {choice: [16, 32]}}}",
        "scheduler.hyperparam_mutations.model.width",
        "cannot change while a trial trains",
    ),
    (
        "scheduler: {type: pb2, hyperparam_mutations: {train.weight_decay: {choice: [0.0, 0.1]}}}",
        "scheduler.hyperparam_mutations.train.weight_decay",
        "give uniform, loguniform or int",
    ),
    ("scheduler: {type: pb2, resample_probability: 0.5}", "scheduler.resample_probability", "remove it"),
    (
        "scheduler: {type: asha, perturbation_interval: 2}",
        "scheduler.perturbation_interval",
        "pbt and pb2 only",
    ),
    (
        "scheduler: {type: pbt, quantile_fraction: 0.7}",
        "scheduler.quantile_fraction",
        "less than or equal to 0.5",
    ),
    ("scheduler: {type: pbt, perturbation_interval: 0}", "scheduler.perturbation_interval", "greater than"),
]


@pytest.mark.parametrize(("extra", "key", "message"), REFUSED, ids=[r[1] + ":" + r[2] for r in REFUSED])
def test_population_scheduler_refused_with_one_line_naming_the_key(extra, key, message):
    lines = _problems(extra)
    assert all("\n" not in line for line in lines)
    hits = [line for line in lines if line.startswith(f"x.yaml: {key}: ")]
    assert hits and any(message in line for line in hits), lines


def test_a_flop_budget_is_refused_beside_pbt():
    lines = _problems("scheduler: {type: pbt}\ntrial: {train: {train_flops: 1.0e9}}\n")
    assert any(line.startswith("x.yaml: scheduler.type: pbt exploits at epochs") for line in lines), lines


def test_without_anything_to_mutate_pbt_says_what_to_give():
    lines = _problems("scheduler: {type: pb2, hyperparam_mutations: {}}\n")
    assert any(line.startswith("x.yaml: scheduler.hyperparam_mutations: pb2 needs values") for line in lines)


def test_the_schema_knows_the_population_options():
    validator = jsonschema.Draft202012Validator(study_schema())
    doc = parse(ORDINARY + "scheduler: {type: pb2, perturbation_interval: 2, quantile_fraction: 0.5}", "x")
    assert list(validator.iter_errors(doc)) == []
    bad = parse(ORDINARY + "scheduler: {type: pbt, hyperparam_mutations: {train.lr: {between: [1, 2]}}}", "x")
    assert list(validator.iter_errors(bad))
