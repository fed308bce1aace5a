"""`train.precision`: bf16 autocast training on the CPU end to end, `auto` resolved and recorded as
run, the old `train.amp` read as what it meant, bad values refused in one line."""

from __future__ import annotations

import math

import pytest
import torch
from pydantic import ValidationError

from vitscale.precision import cpu_has_native_bf16
from vitscale.study import SpecError, load_study, run_params, run_trial
from vitscale.train import TrialConfig, fit
from vitscale.train.checkpoint import CHECKPOINT_FILE, load_checkpoint
from vitscale.train.config import TrainConfig

CPU_AUTO = "bfloat16" if cpu_has_native_bf16() else "float32"  # what `auto` is on this machine's CPU
ADAPTIVE_ODE = {"regime": "ode", "ode": {"solver": "dopri5", "rtol": 1e-2, "atol": 1e-2}}


@pytest.mark.parametrize(
    "model", [{"mixer": "attention"}, {"mixer": "ssog"}, {"mixer": "ssog", **ADAPTIVE_ODE}], ids=str
)
def test_bf16_trains_on_cpu_and_keeps_float32_weights(tiny_trial, tmp_path, model):
    bf16 = fit(tiny_trial(model=model, train={"epochs": 2, "precision": "bfloat16"}), checkpoint_dir=tmp_path)
    fp32 = fit(tiny_trial(model=model, train={"epochs": 2, "precision": "float32"}))
    for metrics in bf16.history:
        assert math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["val_loss"])
    assert 0 <= bf16.metrics["test_top1"] <= 1
    # autocast did run on the CPU (same seed, other rounding), and was not silently ignored
    assert bf16.history[-1]["train_loss"] != fp32.history[-1]["train_loss"]
    state = load_checkpoint(tmp_path / CHECKPOINT_FILE)
    assert {v.dtype for v in state.model.values() if v.is_floating_point()} == {torch.float32}
    moments = [t for s in state.optimizer["state"].values() for t in s.values() if t.is_floating_point()]
    assert moments and {t.dtype for t in moments} == {torch.float32}
    assert state.trial_config["train"]["precision"] == "bfloat16"


def test_auto_is_bfloat16_on_cuda_and_on_cpus_with_native_bf16():
    trial = TrialConfig()
    assert trial.train.precision == "auto"
    assert trial.with_precision("cpu").train.precision == CPU_AUTO
    assert trial.with_precision("cuda").train.precision == "bfloat16"
    chosen = TrialConfig.model_validate({"train": {"precision": "bfloat16"}})
    assert chosen.with_precision("cpu").train.precision == "bfloat16"


def test_native_bf16_is_read_from_the_cpu_flags(tmp_path):
    flags = {
        "zen4": "fpu avx2 avx512f avx512_bf16 avx512_vnni",
        "spr": "avx512f amx_bf16 amx_tile",
        "old": "avx2 fma",
    }
    for name, line in flags.items():
        (tmp_path / name).write_text(f"processor\t: 0\nflags\t\t: {line}\n")
    assert cpu_has_native_bf16(str(tmp_path / "zen4")) and cpu_has_native_bf16(str(tmp_path / "spr"))
    assert not cpu_has_native_bf16(str(tmp_path / "old"))
    assert not cpu_has_native_bf16(str(tmp_path / "absent"))  # not Linux: unknown, so float32


def test_old_amp_reads_as_the_precision_it_meant():
    assert TrainConfig.model_validate({"amp": True}).precision == "auto"
    assert TrainConfig.model_validate({"amp": False}).precision == "float32"
    with pytest.raises(ValidationError, match=r"train\.amp: replaced by train\.precision"):
        TrainConfig.model_validate({"amp": True, "precision": "bfloat16"})
    with pytest.raises(ValidationError, match="precision"):
        TrainConfig.model_validate({"precision": "float16"})


STUDY = """
name: prec
trial:
  model: {width: 16, depth: 1, heads: 2, patch_size: 4}
  data: {dataset: digits, resolution: 16}
space:
  model.mixer: {grid: [ssog]}
objectives: [{metric: val_top1, mode: max}]
"""


@pytest.mark.parametrize(
    ("extra", "gpu", "expected"),
    [
        ("", 0, CPU_AUTO),
        ("", 1, "bfloat16"),
        ("  train: {device: cpu}\n", 1, CPU_AUTO),
        ("  train: {precision: bfloat16}\n", 0, "bfloat16"),
        ("  train: {amp: false}\n", 1, "float32"),
    ],
)
def test_a_study_trial_records_its_precision_resolved(tmp_path, extra, gpu, expected):
    text = STUDY.replace("  data:", extra + "  data:", 1) if extra else STUDY
    path = tmp_path / "s.yaml"
    path.write_text(text + f"resources: {{cpu: 1, gpu: {gpu}}}\n")
    trial = run_trial(load_study(path), {"model.mixer": "ssog"}, 0)
    assert trial.train.precision == expected
    assert run_params(trial)["train.precision"] == expected


def test_searching_the_old_amp_key_names_its_replacement(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace("space:\n", "space:\n  train.amp: {grid: [true, false]}\n"))
    with pytest.raises(SpecError, match=r"not a field .*replaced by train\.precision"):
        load_study(path)
