"""Trajectory distillation (train.distill): zero loss against one's own looped weights, the time
grid adds no solver work, one-line teacher mismatches, `best_of` teachers resolved through MLflow."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from mlflow import MlflowClient

from vitscale.cli import main
from vitscale.errors import TeacherMismatch, TrialFailure, UserError
from vitscale.models import MIXERS, build
from vitscale.study import flatten, load_study, resolve_trial
from vitscale.train import TrialConfig, fit, teacher
from vitscale.train.checkpoint import TrainState, save_checkpoint
from vitscale.train.config import DistillConfig
from vitscale.train.distill import make_distiller
from vitscale.train.from_mlflow import resolve_spec_teachers

TINY = {"width": 16, "depth": 3, "heads": 2, "patch_size": 4, "image_size": 16, "in_chans": 1}


def _save_teacher(model, directory) -> str:
    state = TrainState(0, model.state_dict(), {}, {}, {}, [], model.config.model_dump(mode="json"))
    return str(save_checkpoint(directory, state))


@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_own_looped_weights_as_teacher_give_zero_trajectory_loss(tmp_path, mixer):
    """Euler step 1 over [0, depth] is the looped model: x(t_k) = h_k exactly, at initialisation."""
    torch.manual_seed(0)
    student = build({**TINY, "mixer": mixer, "regime": "ode", "ode": {"solver": "euler", "step_size": 1.0}})
    teacher = build({**TINY, "mixer": mixer, "regime": "looped"})
    teacher.load_state_dict(student.state_dict())
    config = DistillConfig(teacher=_save_teacher(teacher, tmp_path), weight=1.0, logit_weight=1.0)
    distiller = make_distiller(config, student.config, 16, torch.device("cpu"), total_steps=10)
    images = torch.randn(4, 1, 16, 16)
    logits, extra, parts = distiller.forward(student, images, step=0)
    assert parts["per_layer"].shape == (3,)
    assert parts["distill_loss"].item() == pytest.approx(0.0, abs=1e-10)
    assert parts["distill_logit_loss"].item() == pytest.approx(0.0, abs=1e-6)
    assert extra.item() == pytest.approx(0.0, abs=1e-6)
    assert student.last_nfe == 3  # the t_k are grid points: no extra evaluation
    torch.testing.assert_close(logits, student(images))


@pytest.mark.parametrize("ode", [{"solver": "rk4", "step_size": 0.5}, {"solver": "dopri5"}])
def test_layer_times_join_the_solve_without_extra_evaluations(ode):
    model = build({**TINY, "mixer": "ssog", "regime": "ode", "ode": ode})
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        plain = model(images)
        nfe = model.last_nfe
        logits, states = model.forward_states(images, [1, 2, 3])
    assert model.last_nfe == nfe and states.shape == (3, 2, 17, 16)
    torch.testing.assert_close(logits, plain, atol=1e-5, rtol=1e-5)


def test_discrete_states_are_the_blocks_outputs():
    model = build({**TINY, "mixer": "attention"})
    images = torch.randn(2, 1, 16, 16)
    with torch.no_grad():
        _, states = model.forward_states(images, [2])
        x, grid = model.embed(images)
        for block in model.blocks.blocks[:2]:
            x = block(x, grid)
    torch.testing.assert_close(states[0], x)


def test_a_mismatched_teacher_fails_in_one_line_naming_both(tmp_path):
    teacher = build({**TINY, "width": 32, "depth": 2})
    config = DistillConfig(teacher=_save_teacher(teacher, tmp_path), weight=1.0)
    student = build({**TINY, "regime": "ode"}).config
    with pytest.raises(TeacherMismatch) as info:
        make_distiller(config, student, 16, torch.device("cpu"), total_steps=1)
    message = str(info.value)
    assert len(message.splitlines()) == 1
    assert "width=32" in message and "width=16" in message and "depth 2 != student depth 3" in message
    assert info.value.reason == "teacher_mismatch"  # a FAILED trial in a study, never retried
    assert isinstance(info.value, TrialFailure) and isinstance(info.value, UserError)  # exit 2 in the CLI


def test_cli_mismatched_teacher_is_exit_2_and_one_line(tmp_path, capsys):
    teacher = build({**TINY, "width": 32, "depth": 1, "num_classes": 10})
    path = _save_teacher(teacher, tmp_path / "teacher")
    args = ["train", "--width", "16", "--depth", "1", "--heads", "2", "--regime", "ode", "--resolution", "16"]
    with pytest.raises(SystemExit) as info:
        main([*args, "--epochs", "1", "--no-track", "--distill-teacher", path])
    err = capsys.readouterr().err.strip().splitlines()
    assert info.value.code == 2 and len(err) == 1 and "teacher_mismatch" not in err[0]
    assert "width 32 != 16" in err[0]


def _trial_run(client, experiment_id, params, val_top1, checkpoint=None):
    run_id = client.create_run(
        experiment_id, tags={"vitscale.role": "trial", "vitscale.status": "FINISHED"}
    ).info.run_id
    for key, value in params.items():
        client.log_param(run_id, key, value)
    client.log_metric(run_id, "val_top1", val_top1)
    client.log_metric(run_id, "test_top1", 1.0 - val_top1)  # must never decide
    if checkpoint is not None:
        client.log_artifact(run_id, checkpoint, artifact_path="checkpoint")
    client.set_terminated(run_id, "FINISHED")
    return run_id


def test_best_of_another_study_is_resolved_by_validation_and_recorded(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("teachers", artifact_location=str(tmp_path / "artifacts"))
    base = {"model": {"width": 16, "depth": 1, "heads": 2, "patch_size": 4}}
    data = {"dataset": "digits", "resolution": 16, "num_train": 128, "num_val": 64}
    train = {"epochs": 1, "batch_size": 64, "threads": 1}
    runs = {}
    for mixer in ("attention", "ssog"):
        trial = TrialConfig.model_validate(
            {"model": {**base["model"], "mixer": mixer}, "data": data, "train": train}
        )
        ckpt = fit(trial, checkpoint_dir=tmp_path / mixer).checkpoint
        teacher_params = {k: str(v) for k, v in flatten(trial).items()}
        runs[mixer] = _trial_run(client, experiment, teacher_params, 0.8, str(ckpt))
        _trial_run(client, experiment, teacher_params, 0.5, str(ckpt))  # a worse seed
        looped = {**teacher_params, "model.regime": "looped"}
        _trial_run(client, experiment, looped, 0.99, str(ckpt))  # better, but not discrete
    study = {
        "name": "students",
        "trial": {
            "model": {**base["model"], "regime": "ode", "ode": {"solver": "euler"}},
            "data": data,
            "train": {
                **train,
                "distill": {
                    "teacher": {
                        "best_of": "teachers",
                        "where": {"model.mixer": "same", "model.regime": "discrete"},
                    },
                    "weight": 1.0,
                },
            },
        },
        "space": {"model.mixer": {"grid": ["attention", "ssog"]}},
        "search": {"algorithm": "grid", "seeds": [0]},
        "objectives": [{"metric": "val_top1", "mode": "max"}],
    }
    path = tmp_path / "students.yaml"
    path.write_text(yaml.safe_dump(study))
    spec = resolve_spec_teachers(load_study(path), uri, tmp_path / "execution")
    table = spec.trial.train.distill.teacher.resolved
    assert {json.loads(k)[0]: v["run_id"] for k, v in table.items()} == runs
    trial = resolve_trial(spec, {"model.mixer": "ssog"}, 0)
    params = flatten(trial)
    assert params["train.distill.teacher_run_id"] == runs["ssog"]
    assert params["train.distill.teacher"].startswith(str(tmp_path / "execution" / "teachers" / runs["ssog"]))
    metrics = fit(trial).metrics  # the downloaded teacher loads and fits the student
    assert metrics["distill_loss"] >= 0 and "distill_err_k1" in metrics

    # A run without a logged checkpoint: one line naming the run.
    lone = client.create_experiment("bare")
    bare = _trial_run(client, lone, teacher_params, 0.9)
    bare_path = tmp_path / "bare.yaml"
    study["trial"]["train"]["distill"]["teacher"]["best_of"] = "bare"
    bare_path.write_text(yaml.safe_dump(study))
    with pytest.raises(TeacherMismatch, match=f"run {bare} has no logged checkpoint") as info:
        resolve_spec_teachers(load_study(bare_path), uri, tmp_path / "execution2")
    assert len(str(info.value).splitlines()) == 1


def test_a_worker_keeps_only_the_last_few_teachers(tmp_path):
    """A reused worker alternates between arms' teachers: the cache is bounded (LRU), not a leak."""
    paths = [
        _save_teacher(build({**TINY, "depth": 1}), tmp_path / f"t{i}")
        for i in range(teacher.TEACHERS_KEPT + 1)
    ]
    first = teacher.load_teacher(paths[0], torch.device("cpu"))[0]
    for path in paths[1:]:
        teacher.load_teacher(path, torch.device("cpu"))
    assert len(teacher._CACHE) == teacher.TEACHERS_KEPT
    assert teacher.load_teacher(paths[-1], torch.device("cpu"))[0] is not first  # cached, distinct
    assert teacher.load_teacher(paths[0], torch.device("cpu"))[0] is not first  # evicted: rebuilt
