"""Comparison studies: arms and their checks, selection on validation, ASHA within an arm, and
(slow) a whole tuned comparison killed during its final phase and resumed."""

from __future__ import annotations

import json
import re
import signal
import time
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

import pytest
from study_helpers import child_runs, parent_runs, start_vitscale, vitscale, write_study

from vitscale.study import SpecError, count_trials, load_study
from vitscale.study.comparison import arm_list, arm_study, arm_values, confirm_study, final_study
from vitscale.study.matching import model_params
from vitscale.tracking.layout import arm_key
from vitscale.tune.arm_asha import ArmASHA
from vitscale.tune.selection import choose

ROOT = Path(__file__).resolve().parents[2]

COMPARISON = {
    "kind": "comparison",
    "arms": {"model.mixer": ["attention", "ssog"]},
    "reference": {"model.mixer": "attention"},
    "space": {
        "train.lr": {"loguniform": [1.0e-3, 1.0e-2]},
        "model.ssog.num_gaussians": {"int": [1, 4], "when": {"model.mixer": "ssog"}},
    },
    "search": {"algorithm": "tpe", "num_samples": 2, "seeds": [0], "max_concurrent_trials": 2},
    "final": {"seeds": [100, 101]},
}


def test_arms_are_every_combination_and_each_tunes_its_own_space():
    spec = load_study(ROOT / "studies/tuned_quickstart.yaml")
    arms = arm_list(spec)
    assert [arm_key(a) for a in arms][:2] == [
        "model.mixer=attention,model.regime=discrete",
        "model.mixer=attention,model.regime=ode",
    ]
    assert len(arms) == 4 and count_trials(spec) == 4 * 4 + 4 * 3
    study = arm_study(spec, arms[-1])
    assert study.kind == "train" and study.trial.model.mixer == "ssog" and study.trial.model.regime == "ode"
    assert study.search.num_samples == spec.search.num_samples and study.search.seeds == spec.search.seeds
    own = {k for k, p in spec.space.items() if "model.mixer" not in p.conditions()}
    assert set(study.space) == own | {
        "model.ssog.kernel_lr_scale",
        "model.ssog.sigma_min_tokens",
        "model.pos_embed",
    }
    assert "model.attention.qk_norm" in arm_study(spec, arms[0]).space


def test_each_arm_samples_with_its_own_sampler_seed_and_the_same_budget():
    """A shared sampler seed handed every arm the same random points (three of four arms of
    tuned_quickstart picked the identical config)."""
    spec = load_study(ROOT / "studies/tuned_quickstart.yaml")
    studies = [arm_study(spec, arm) for arm in arm_list(spec)]
    assert [s.search.sampler_seed for s in studies] == [spec.search.sampler_seed + i for i in range(4)]
    assert {s.search.num_samples for s in studies} == {spec.search.num_samples}


def test_final_seeds_that_also_tune_are_refused_in_one_line(tmp_path):
    path = write_study(tmp_path, "cmp", **{**COMPARISON, "final": {"seeds": [0, 1, 2]}})
    with pytest.raises(SpecError) as err:
        load_study(path)
    (line,) = [line for line in err.value.lines if "final.seeds" in line]
    assert "[0] also tune" in line and "selection never saw" in line


def test_tuning_runs_at_the_fidelity_and_the_final_phase_at_the_trials(tmp_path):
    fidelity = {"data.num_train": 100, "train.epochs": 1}
    data = {**COMPARISON, "search": {**COMPARISON["search"], "fidelity": fidelity}}
    data["scheduler"] = {"type": "asha", "grace_period": 1}
    spec = load_study(write_study(tmp_path, "cmp", **data))
    tuning = arm_study(spec, arm_list(spec)[0])
    assert tuning.trial.data.num_train == 100 and tuning.trial.train.epochs == 1
    assert tuning.scheduler.max_t == 1 and tuning.search.fidelity is None
    final = final_study(spec)
    assert final.trial.data.num_train == spec.trial.data.num_train == 192
    assert final.trial.train.epochs == spec.trial.train.epochs == 2


def test_only_the_final_runs_evaluate_test(tmp_path):
    """Selection reads validation: tuning and confirmation trials never score a test image; the
    final runs do, after every epoch (the learning curves)."""
    fidelity = {"data.num_train": 100, "train.epochs": 1}
    data = {**COMPARISON, "search": {**COMPARISON["search"], "fidelity": fidelity, "confirm": {"top_k": 3}}}
    spec = load_study(write_study(tmp_path, "cmp", **data))
    arm = arm_list(spec)[0]
    for phase in (arm_study(spec, arm), confirm_study(spec, arm)):
        assert not phase.trial.train.evaluate_test and not phase.trial.train.test_curve
    final = final_study(spec).trial.train
    assert final.evaluate_test and final.test_curve


@pytest.mark.parametrize(
    ("fidelity", "message"),
    [
        ({"train.lr": 0.1}, "also in space"),
        ({"model.mixer": "ssog"}, "also an arm key"),
        ({"model.width": 16}, "the model is what the final phase re-runs"),
        ({"data.nope": 1}, "not a field of the trial"),
    ],
)
def test_a_fidelity_key_that_cannot_be_lowered_is_refused(tmp_path, fidelity, message):
    data = {**COMPARISON, "search": {**COMPARISON["search"], "fidelity": fidelity}}
    with pytest.raises(SpecError) as err:
        load_study(write_study(tmp_path, "cmp", **data))
    assert any("search.fidelity." in line and message in line for line in err.value.lines), err.value.lines


def test_a_parameter_of_one_arm_is_not_searched_in_the_others(tmp_path):
    spec = load_study(write_study(tmp_path, "cmp", **COMPARISON))
    attention, ssog = arm_list(spec)
    assert "model.ssog.num_gaussians" not in arm_study(spec, attention).space
    assert "model.ssog.num_gaussians" in arm_study(spec, ssog).space


@pytest.mark.parametrize(
    ("override", "key"),
    [
        ("reference={model.mixer: pooling}", "reference.model.mixer"),
        ("final=null", "final"),
        ("arms={model.mixer: [ssog]}", "arms"),
        ("arms={model.nope: [1, 2]}", "arms.model.nope"),
        ("objectives=[{metric: test_top1, mode: max}]", "objectives"),
        ("space.model.mixer={choice: [attention]}", "arms.model.mixer"),
    ],
)
def test_comparison_problems_name_the_key(tmp_path, override, key):
    path = write_study(tmp_path, "cmp", **COMPARISON)
    with pytest.raises(SpecError) as err:
        load_study(path, [override])
    assert any(f": {key}:" in line for line in err.value.lines), err.value.lines


def _result(point, seed, value, *, epoch=2, planned=2, reason="", error=None):
    metrics = {"val_top1": value, "test_top1": 1.0, "epoch": epoch, "planned_epochs": planned}
    metrics["failure_reason"] = reason
    return SimpleNamespace(config={"point": point, "seed": seed}, metrics=metrics, error=error)


def test_selection_uses_the_validation_mean_over_seeds_and_failures_never_win():
    a, b, c, d = ({"train.lr": lr} for lr in (1e-3, 2e-3, 3e-3, 4e-3))
    results = [
        _result(a, 0, 0.50),
        _result(a, 1, 0.70),  # mean 0.60: the winner
        _result(b, 0, 0.65),
        _result(b, 1, 0.45),  # mean 0.55
        _result(c, 0, 0.99),
        _result(c, 1, 0.99, reason="diverged"),  # one failed replicate: disqualified
        _result(d, 0, 0.99, epoch=1),
        _result(d, 1, 0.99, epoch=1),  # stopped early: disqualified
    ]
    choice = choose(results, "model.mixer=ssog", {"model.mixer": "ssog"}, [0, 1], "val_top1", "max")
    assert choice.point == a and choice.score == pytest.approx(0.60)
    assert choice.tuning_trials == 8 and choice.qualified_points == 2
    none = choose(results[4:], "x", {}, [0, 1], "val_top1", "max")
    assert none.point is None and none.score is None


def test_asha_compares_trials_of_the_same_arm_only(tmp_path):
    spec = load_study(
        write_study(tmp_path, "asha", space={"model.mixer": {"grid": ["attention", "ssog"]}}),
        ["trial.train.epochs=4"],
    )
    scheduler = ArmASHA(
        spec, time_attr="epoch", metric="val_top1", mode="max", max_t=4, grace_period=1, reduction_factor=2
    )

    def trial(trial_id, mixer):
        return SimpleNamespace(trial_id=trial_id, config={"point": {"model.mixer": mixer}, "seed": 0})

    fast, slow, slow2 = trial("a", "attention"), trial("s", "ssog"), trial("s2", "ssog")
    for t in (fast, slow, slow2):
        scheduler.on_trial_add(None, t)
    assert scheduler.on_trial_result(None, fast, {"epoch": 1, "val_top1": 0.9}) == "CONTINUE"
    # Plain ASHA would stop this one: 0.1 is below attention's 0.9 at the same rung.
    assert scheduler.on_trial_result(None, slow, {"epoch": 1, "val_top1": 0.1}) == "CONTINUE"
    # Within its own arm, a weaker SSoG trial is stopped.
    assert scheduler.on_trial_result(None, slow2, {"epoch": 1, "val_top1": 0.05}) == "STOP"
    assert set(scheduler.arms) == {
        "model.mixer=attention,model.regime=discrete",
        "model.mixer=ssog,model.regime=discrete",
    }


@pytest.mark.slow
def test_comparison_killed_in_its_final_phase_resumes_to_exactly_the_plan(tmp_path):
    study = write_study(tmp_path, "cmp-resume", **COMPARISON)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    command = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(results)]
    command += ["--num-cpus", "1", "--quiet"]
    command += [
        "--set",
        "trial.train.epochs=10",
    ]  # final runs slow enough to be killed mid-phase (workers are reused)
    command += ["--set", "search.max_concurrent_trials=1"]
    driver = start_vitscale(*command, cwd=tmp_path)
    try:
        deadline = time.time() + 420
        while time.time() < deadline:
            if _finished(uri, "cmp-resume", "final") >= 1:
                break
            assert driver.poll() is None, "the study ended before it could be killed"
            time.sleep(0.5)
        else:
            pytest.fail("no final run finished within 420 s")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    assert _finished(uri, "cmp-resume", "final") < 4

    resume = ["study", "resume", "cmp-resume", "--storage", str(results), "--num-cpus", "1", "--quiet"]
    proc = vitscale(*resume, cwd=tmp_path, timeout=300)
    assert "8 finished" in proc.stdout, proc.stdout
    # Each line of the resumed final phase counts the whole study too (its tuning phases, done by
    # the killed driver, read back from MLflow), and `study status` shows the run's last line.
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[cmp-resume] final ")]
    assert lines and all(" — study " in line for line in lines), proc.stdout
    assert lines[-1].endswith(" — study 8/8 done · 0 failed · ETA 0s"), lines[-1]
    status = vitscale("study", "status", "--storage", str(results), cwd=tmp_path).stdout.strip()
    assert status.startswith(lines[-1].split(" · elapsed ")[0]), (status, lines[-1])  # same counts, same best
    assert re.search(r" — study 8/8 done · 0 failed · finished \(execution [\w-]+\)$", status), status
    [parent] = parent_runs(uri, "cmp-resume")
    assert parent.data.tags["vitscale.kind"] == "comparison"
    assert json.loads(parent.data.tags["vitscale.reference"]) == {"model.mixer": "attention"}
    runs = child_runs(uri, "cmp-resume")
    finished = [r for r in runs if r.data.tags["vitscale.status"] == "FINISHED"]
    phases = Counter((r.data.tags["vitscale.phase"], r.data.tags["vitscale.arm"]) for r in finished)
    assert phases == {
        ("tune", "model.mixer=attention"): 2,
        ("tune", "model.mixer=ssog"): 2,
        ("final", "model.mixer=attention"): 2,
        ("final", "model.mixer=ssog"): 2,
    }
    finals = [r for r in finished if r.data.tags["vitscale.phase"] == "final"]
    assert sorted((r.data.params["model.mixer"], r.data.params["train.seed"]) for r in finals) == [
        ("attention", "100"),
        ("attention", "101"),
        ("ssog", "100"),
        ("ssog", "101"),
    ]
    assert all("test_top1" in r.data.metrics for r in finals)
    assert all(r.data.tags["vitscale.status"] == "KILLED" for r in runs if r not in finished)


def _finished(uri: str, study: str, phase: str) -> int:
    try:
        runs = child_runs(uri, study)
    except Exception:  # the store or experiment may not exist yet
        return 0
    return sum(
        r.data.tags.get("vitscale.status") == "FINISHED" and r.data.tags.get("vitscale.phase") == phase
        for r in runs
    )


def test_the_arm_table_never_cuts_an_arm_name_or_a_tuned_value_at_80_columns():
    """Seen on tuned_quickstart: 'attention/…' twice, and 'weight_dec…', in an 80-column terminal."""
    from rich.console import Console

    from vitscale.cli.run_cmd import arm_table

    point = {"train.lr": 0.0061904901667741855, "train.weight_decay": 0.0123456, "train.warmup_epochs": 1.5}
    rows = [
        dict(arm=f"model.mixer={m},model.regime={r}", point={**point, "model.width": 32}, tuning_score=0.8252,
             final_runs=2, val_top1=0.7483, test_top1=0.7006)
        for m in ("attention", "ssog") for r in ("discrete", "ode")
    ]  # fmt: skip
    console = Console(width=80, record=True)
    console.print(arm_table(rows))
    text = console.export_text()
    for name in ("attention/discrete", "attention/ode", "ssog/discrete", "ssog/ode"):
        assert name in text
    for value in ("lr=0.00619", "weight_decay=0.0123", "warmup_epochs=1.5", "width=32", "82.52", "70.06"):
        assert text.count(value) == 4, (value, text)
    assert "…" not in text


def test_without_a_terminal_the_arm_table_is_never_folded_mid_number(capsys, monkeypatch):
    """The issue: `weight_decay=0.0083|7` in a log file: Rich assumed 80 columns without a TTY."""
    from vitscale.cli.console import stdout_console
    from vitscale.cli.run_cmd import arm_table

    point = {
        "train.lr": 0.00338175,
        "train.weight_decay": 0.00836123,
        "train.warmup_epochs": 0.5,
        "model.ssog.kernel_lr_scale": 1.8712,
        "model.ssog.sigma_min_tokens": 0.5,
        "model.pos_embed": False,
        "model.width": 32,
    }
    rows = [
        dict(arm=f"model.mixer={m},model.regime={r}", point=point, tuning_score=0.4266, final_runs=3,
             val_top1=0.2448, test_top1=0.2201)
        for m in ("attention", "ssog") for r in ("discrete", "ode")
    ]  # fmt: skip
    monkeypatch.delenv("COLUMNS", raising=False)
    stdout_console().print(arm_table(rows))
    out = capsys.readouterr().out
    for value in ("weight_decay=0.00836", "kernel_lr_scale=1.87", "sigma_min_tokens=0.5", "24.48", "22.01"):
        assert out.count(value) == 4, (value, out)
    monkeypatch.setenv("COLUMNS", "60")  # a width the user sets still decides
    assert stdout_console().width == 60


def test_a_pbt_members_schedule_shows_as_its_steps_in_the_arm_table():
    """A PBT arm's tuned point holds `train.schedule` (its steps): one line per step's values, not
    the list of dicts that made the table three screens wide."""
    from rich.console import Console

    from vitscale.cli.run_cmd import arm_table

    schedule = [
        {"epoch": 1, "values": {"train.lr": 0.00125}, "cloned_from": None},
        {"epoch": 2, "values": {"train.lr": 0.0015}, "cloned_from": "a1b2c_00001"},
    ]
    row = dict(arm="model.mixer=attention", point={"train.lr": 0.00125, "train.schedule": schedule},
               tuning_score=0.8, final_runs=1, val_top1=0.8, test_top1=0.79)  # fmt: skip
    console = Console(width=100, record=True)
    console.print(arm_table([row]))
    text = console.export_text()
    assert "schedule=e1: lr=0.00125; e2: lr=0.0015" in text
    assert "cloned_from" not in text and "{" not in text


@pytest.mark.parametrize("key", ["model.mlp_ratio", "model.width"])
def test_parameter_matched_arms_are_within_two_percent_of_their_reference(tmp_path, key):
    """`match`: SSoG has no queries or keys (2·C² fewer weights per mixer), so at equal width it has
    fewer parameters; matched, it gets the MLP (or width) that brings it within 2 %."""
    data = {
        **COMPARISON,
        "arms": {"model.mixer": ["attention", "ssog"], "model.regime": ["discrete", "looped"]},
    }
    data["trial"] = {"model": {"width": 96, "depth": 4, "heads": 2, "patch_size": 4}}
    data["match"] = {"params": key}
    spec = load_study(write_study(tmp_path, "cmp", **data))
    for arm in arm_list(spec):
        values = arm_values(spec, arm)
        reference = arm_study(spec, {**arm, "model.mixer": "attention"}).trial.model.model_dump(mode="json")
        built = arm_study(spec, arm).trial.model.model_dump(mode="json")
        assert abs(model_params(built) - model_params(reference)) <= 0.02 * model_params(reference)
        if arm["model.mixer"] == "ssog":
            assert key in values and final_point_equals(spec, arm, values)
        else:
            assert key not in values  # the reference arm keeps the base trial's model


def final_point_equals(spec, arm, values) -> bool:
    """The final phase re-runs the same matched model the arm was tuned with."""
    from vitscale.tune.comparison import _final_points

    [point] = _final_points(spec, {"a": {"values": arm, "point": {"train.lr": 1e-3}}})
    return all(point[k] == v for k, v in values.items())


def test_a_width_that_cannot_match_within_tolerance_is_refused_in_one_line(tmp_path):
    data = {**COMPARISON, "trial": {"model": {"width": 64, "depth": 4, "heads": 32, "patch_size": 4}}}
    data["match"] = {"params": "model.width", "tolerance": 0.001}
    with pytest.raises(SpecError) as err:
        load_study(write_study(tmp_path, "cmp", **data))
    (line,) = [line for line in err.value.lines if "match.params" in line]
    assert "tolerance" in line and "model.mixer=ssog" in line
