"""The trial as a worker runs it and as MLflow logs it: threads decided, resolved defaults, the
active mixer's and regime's settings only; `study show` prints what the nulls become."""

from __future__ import annotations

import json

import pytest

from vitscale.cli import main
from vitscale.data.registry import recommended_recipe
from vitscale.study import config_key, resolve_trial, run_params, run_trial, validate_study
from vitscale.study.defaults import run_defaults
from vitscale.study.yamlio import parse
from vitscale.train.config import GENERIC_RECIPE, TrialConfig, flatten
from vitscale.train.from_mlflow import section_params

SPEC = """
name: record
trial:
  model: {width: 32, heads: 2, patch_size: 4}
  data: {dataset: digits, resolution: 16}
  train: {epochs: 2, device: cpu}
space:
  model.mixer: {grid: [attention, ssog]}
  model.regime: {grid: [discrete, ode]}
resources: {cpu: 2, gpu: 0}
"""


@pytest.fixture
def spec():
    return validate_study(parse(SPEC), "record.yaml")


def test_a_trial_runs_with_the_threads_of_its_cpus_unless_it_sets_them(spec):
    point = {"model.mixer": "ssog", "model.regime": "ode"}
    assert resolve_trial(spec, point, 0).train.threads is None
    assert run_trial(spec, point, 0).train.threads == 2
    own = validate_study(parse(SPEC.replace("device: cpu}", "device: cpu, threads: 1}")), "record.yaml")
    assert run_trial(own, point, 0).train.threads == 1
    # The replicate key is the resolved trial's, as before threads were set: old and new runs group.
    assert config_key(resolve_trial(spec, point, 0)) == config_key(resolve_trial(spec, point, 1))


def test_params_hold_the_active_sections_with_every_default_resolved(spec):
    ssog = run_params(run_trial(spec, {"model.mixer": "ssog", "model.regime": "ode"}, 0))
    assert not [k for k in ssog if k.startswith(("model.attention.", "model.axial.", "model.linear."))]
    assert "model.ssog.num_gaussians" in ssog and "model.ode.solver" in ssog
    assert ssog["model.layer_scale"] == 0.1 and ssog["model.pos_embed"] is False
    assert ssog["train.threads"] == 2 and ssog["train.lr"] is not None  # the recipe filled
    attention = run_params(run_trial(spec, {"model.mixer": "attention", "model.regime": "discrete"}, 0))
    assert attention["model.attention.qk_norm"] is False and attention["model.layer_scale"] == 0.0
    assert not [k for k in attention if k.startswith(("model.ssog.", "model.ode."))]


def test_no_param_reads_none_and_the_params_rebuild_the_trial(spec):
    """The issue: ~14 params per child run were the string 'None' (data.hflip, model.head_dim,
    train.distill). A value left to its default is not logged; read back (train --from-run), the
    missing key is that default again. A None that is not the default is kept."""
    for point in ({"model.mixer": "ssog", "model.regime": "ode"}, {"model.mixer": "attention"}):
        trial = run_trial(spec, {"model.regime": "discrete", **point}, 0)
        logged = {k: str(v) for k, v in run_params(trial).items()}  # as MLflow stores them
        assert "None" not in logged.values(), [k for k, v in logged.items() if v == "None"]
        assert not {"data.hflip", "model.head_dim", "train.distill"} & set(logged)
        rebuilt = TrialConfig.model_validate(
            {s: section_params(logged, s) for s in ("model", "data", "train")}
        )
        unused = tuple(f"model.{name}." for name in trial.model.unused_sections())
        assert {k: v for k, v in flatten(rebuilt).items() if not k.startswith(unused)} == {
            k: v for k, v in flatten(trial).items() if not k.startswith(unused)
        }
    no_clip = validate_study(
        parse(SPEC.replace("device: cpu}", "device: cpu, grad_clip: null}")), "record.yaml"
    )
    logged = run_params(run_trial(no_clip, {"model.mixer": "ssog", "model.regime": "ode"}, 0))
    assert "train.grad_clip" in logged and logged["train.grad_clip"] is None  # not the default (1.0)


def test_run_defaults_name_what_each_null_becomes(spec):
    recipe = {**GENERIC_RECIPE, **recommended_recipe("digits")}
    rows = run_defaults(spec)
    assert [names for names, _ in rows] == [
        ["attention · discrete"],
        ["attention · ode"],
        ["ssog · discrete"],
        ["ssog · ode"],
    ]
    for names, values in rows:
        mixer, regime = names[0].split(" · ")
        assert values == {
            "model.pos_embed": mixer == "attention",
            "model.layer_scale": 0.1 if regime == "ode" else 0.0,
            **{f"train.{k}": recipe[k] for k in ("batch_size", "lr", "warmup_epochs", "label_smoothing")},
            "train.threads": 2,
        }


def test_study_show_prints_the_resolved_values(spec, tmp_path, capsys):
    path = tmp_path / "record.yaml"
    path.write_text(SPEC)
    main(["study", "show", str(path)])
    out = capsys.readouterr().out
    assert "# null above is left to a default; the trials run with (and MLflow logs):" in out
    assert "#   ssog · ode: model.pos_embed=false, model.layer_scale=0.1," in out
    main(["study", "show", str(path), "--json"])
    report = json.loads(capsys.readouterr().out)
    first = report["as_run"][0]
    assert first["trials"] == ["attention · discrete"] and first["values"]["train.threads"] == 2
