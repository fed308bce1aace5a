"""fANOVA importance of the searched parameters per arm, never pooled across arms or phases: a
sampler study (table, figures), a planted comparison where the arm explains everything and the
learning rate nothing within an arm, and the comparison store end to end."""

from __future__ import annotations

import csv
import json

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from analysis_stores import COMPARISON_STUDY, _log_run, write_comparison_study

from vitscale.analysis import analyze
from vitscale.analysis.statistics.importance import fanova, importances
from vitscale.tracking import layout

STUDY = "tiny_tpe"


def _write_tpe_study(uri: str, artifacts) -> None:
    """12 TPE-like trials: val_top1 is driven by train.lr (optimum near 3e-3), barely by width."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(STUDY, artifact_location=artifacts.as_uri())
    tags = {layout.ROLE: "study", layout.STUDY: STUDY, layout.KIND: "train"}
    parent = client.create_run(exp, tags=tags).info.run_id
    space = {"train.lr": {"loguniform": [1.0e-4, 1.0e-1]}, "model.width": {"choice": [16, 32]}}
    client.log_text(parent, json.dumps({"name": STUDY, "space": space}), "spec.yaml")
    rng = np.random.default_rng(0)
    for i in range(12):
        lr, width = float(10 ** rng.uniform(-4, -1)), int(rng.choice([16, 32]))
        val = 0.9 - 0.25 * (np.log10(lr) + 2.5) ** 2 + 0.002 * (width == 32)
        params = {"model.mixer": "ssog", "model.regime": "discrete", "model.width": width, "train.lr": lr}
        params |= {"train.seed": 0, "data.dataset": "digits", "data.resolution": 16}
        run_tags = {layout.STUDY: STUDY, layout.KIND: "train", layout.TRIAL_ID: f"t{i}"}
        run_tags |= {layout.STATUS: "FINISHED", layout.STOPPED_EARLY: "false"}
        metrics = {"val_top1": val, "params": 1000.0 * width, "epoch": 2.0}
        _log_run(client, exp, parent, run_tags, params, [], metrics | {"test_top1": val})


def test_importance_table_and_figures(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _write_tpe_study(uri, tmp_path / "artifacts")
    analyze(STUDY, uri, out=tmp_path / "out", n_boot=0, log_artifacts=False)
    report = (tmp_path / "out" / "report.md").read_text()
    assert (
        "## Which searched parameters mattered, per arm (fANOVA, [importance.csv](importance.csv))" in report
    )
    assert "each mixer × regime cell with more than one configuration" in report
    assert "| ssog · discrete | 12 (12) |" in report and "| train.lr |" in report
    with (tmp_path / "out" / "importance.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["parameter"] for r in rows][0] == "train.lr"  # the learning rate drives the objective
    assert {r["parameter"] for r in rows} == {"train.lr", "model.width"}
    assert abs(sum(float(r["importance"]) for r in rows) - 1) < 1e-3
    assert all(r["metric"] == "val_top1" and r["runs"] == "12" and r["phase"] == "all" for r in rows)
    assert {r["arm"] for r in rows} == {"model.mixer=ssog,model.regime=discrete"}
    for name in ("hyperparameter_importance", "parallel_coordinates"):
        for ext in ("png", "svg"):
            assert (tmp_path / "out" / "figures" / f"{name}.{ext}").stat().st_size > 1000


ARM_A = "model.mixer=attention,model.regime=discrete"
ARM_B = "model.mixer=ssog,model.regime=discrete"
ARM_C = "model.mixer=ssog,model.regime=ode"
PLANTED_SPACE = {"train.lr": {"loguniform": [1e-4, 1e-1]}, "train.weight_decay": {"uniform": [0.0, 0.1]}}


def _planted() -> tuple[pa.Table, list[dict]]:
    """Two arms whose searches explored different learning rates (A low, B high) and whose level
    differs by 30 points; within an arm only the weight decay moves validation top-1, lr nothing.
    Then each arm's final phase (4 seeds, lr outside anything tuned, seed-driven values), and a
    third arm whose tuning left 3 runs."""
    rng = np.random.default_rng(3)
    cols: dict[str, list] = {k: [] for k in ("arm", "phase", "mixer", "regime", "used", "val_top1")}
    cols |= {"train.lr": [], "train.weight_decay": []}

    def add(arm, phase, lr, wd, val):
        values = (arm, phase, *arm.replace("model.mixer=", "").replace("model.regime=", "").split(","))
        for k, v in zip(("arm", "phase", "mixer", "regime"), values, strict=True):
            cols[k].append(v)
        cols["used"].append(True)
        cols["val_top1"].append(val)
        cols["train.lr"].append(lr)
        cols["train.weight_decay"].append(wd)

    for arm, lr_range, base in ((ARM_A, (-4, -3), 0.55), (ARM_B, (-2, -1), 0.85)):
        for _ in range(16):
            wd = float(rng.uniform(0, 0.1))
            add(arm, "tune", float(10 ** rng.uniform(*lr_range)), wd, base + 0.3 * (wd - 0.05))
        for seed in range(4):
            add(arm, "final", 0.05 if arm == ARM_A else 1e-4, 0.05, base + 0.05 * seed)
    for j in range(3):
        add(ARM_C, "tune", 10 ** (-3 + j), 0.01 * j, 0.7 + 0.01 * j)
    pooled = [
        {"params": {"train.lr": lr, "train.weight_decay": wd}, "value": v}
        for lr, wd, v, p in zip(
            cols["train.lr"], cols["train.weight_decay"], cols["val_top1"], cols["phase"], strict=True
        )
        if p == "tune"
    ]
    return pa.table(cols), pooled


def test_importance_is_per_arm_and_the_pooled_answer_is_not():
    """The arm explains everything and lr nothing within an arm: lr is low in each arm, where the
    old pooled fANOVA over all arms gave it the arm difference."""
    table, pooled = _planted()
    assert fanova(pooled, PLANTED_SPACE, ["train.lr", "train.weight_decay"])["train.lr"] > 0.5
    groups = {g["arm"]: g for g in importances(table, PLANTED_SPACE, comparison=True)}
    assert list(groups) == [ARM_A, ARM_B, ARM_C]
    for arm in (ARM_A, ARM_B):
        imp = {r["parameter"]: r["importance"] for r in groups[arm]["importance"]}
        assert imp["train.lr"] < 0.2 and imp["train.weight_decay"] > 0.8, imp
        assert groups[arm]["runs"] == groups[arm]["configs"] == 16 and groups[arm]["phase"] == "tune"
    assert groups[ARM_C]["importance"] == []
    assert (
        groups[ARM_C]["reason"]
        == "too few runs (3 finished, 3 configurations; 4 needed for 2 varied parameters)"
    )


def test_phases_are_never_pooled():
    """The final phase (seeds of one configuration) changes nothing: same numbers without it."""
    table, _ = _planted()
    tune_only = table.filter(pc.equal(table.column("phase"), "tune"))
    with_final = importances(table, PLANTED_SPACE, comparison=True)
    assert with_final == importances(tune_only, PLANTED_SPACE, comparison=True)
    assert all(g["runs"] in (16, 3) for g in with_final)


def test_comparison_report_has_one_row_per_arm_and_parameter(tmp_path):
    """The comparison store: 4 tuning runs per arm over lr; ssog · ode kept 2 (1 failed, 1 stopped)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    write_comparison_study(uri, tmp_path / "artifacts")
    res = analyze(COMPARISON_STUDY, uri, out=tmp_path / "out", n_boot=0, log_artifacts=False)
    report = (tmp_path / "out" / "report.md").read_text()
    assert "each arm's own tuning runs only (phase tune" in report
    assert "| attention · discrete | 4 (4) |" in report
    assert (
        "| ssog · ode | 2 (2) | " in report
        and "| — | too few runs (2 finished, 2 configurations; 4 needed for 1 varied parameters) |" in report
    )
    assert [g["runs"] for g in res.importance] == [4, 4, 4, 2]
    with (tmp_path / "out" / "importance.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["arm"] for r in rows} == {g["arm"] for g in res.importance}
    assert all(r["phase"] == "tune" for r in rows)
    assert [r["note"] for r in rows if r["arm"] == "model.mixer=ssog,model.regime=ode"] == [
        "too few runs (2 finished, 2 configurations; 4 needed for 1 varied parameters)"
    ]


def test_an_arm_with_fewer_than_two_configurations_per_varied_parameter_gets_no_numbers():
    """tuned_quickstart gave fANOVA shares for 7 parameters from 4 configurations: a forest fitted on
    fewer points than twice its inputs attributes noise. 3 configurations of 2 varied parameters
    fall short of 4; 5 configurations of 3 varied parameters fall short of 6."""
    space = {**PLANTED_SPACE, "train.warmup_epochs": {"uniform": [0.0, 1.0]}}
    cols = {k: [] for k in ("arm", "phase", "mixer", "regime", "used", "val_top1", *space)}
    for j in range(5):
        row = {"arm": ARM_A, "phase": "tune", "mixer": "attention", "regime": "discrete", "used": True,
               "val_top1": 0.5 + 0.01 * j, "train.lr": 10 ** (-4 + 0.5 * j),
               "train.weight_decay": 0.01 * j, "train.warmup_epochs": 0.2 * j}  # fmt: skip
        for k, v in row.items():
            cols[k].append(v)
    (group,) = importances(pa.table(cols), space, comparison=True)
    assert group["importance"] == [] and "6 needed for 3 varied parameters" in group["reason"]


def test_an_arm_whose_runs_all_scored_the_same_gets_a_reason_not_a_crash():
    """Low-fidelity tuning at chance (every run 0.104 on 96 images): fANOVA raised 'zero total
    variance' and `vitscale analyze` ended in a traceback."""
    cols = {k: [] for k in ("arm", "phase", "mixer", "regime", "used", "val_top1", *PLANTED_SPACE)}
    for j in range(6):
        row = {"arm": ARM_A, "phase": "tune", "mixer": "attention", "regime": "discrete", "used": True,
               "val_top1": 0.104, "train.lr": 10 ** (-4 + 0.5 * j), "train.weight_decay": 0.01 * j}  # fmt: skip
        for k, v in row.items():
            cols[k].append(v)
    (group,) = importances(pa.table(cols), PLANTED_SPACE, comparison=True)
    assert group["importance"] == [] and group["spread"] == 0
    assert group["reason"] == "every run scored the same val_top1: nothing to attribute"
