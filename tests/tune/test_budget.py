"""Budgets in compute: a search draws points until its trials spent `search.budget`."""

from __future__ import annotations

import json

import pytest
from ray.tune.search import Searcher
from study_helpers import child_runs, vitscale, write_study
from test_replicates import RecordingSearcher

from vitscale.study import load_study
from vitscale.study.errors import SpecError
from vitscale.study.spec import BUDGET_MAX_SAMPLES
from vitscale.tune.budget import ComputeBudget, budget_of, spent_by_results
from vitscale.tune.replicates import ReplicatedSearcher


def _budgeted(flops: float) -> ReplicatedSearcher:
    budget = ComputeBudget("train_flops", flops)
    return ReplicatedSearcher(RecordingSearcher(), [0, 1], ["val_top1"], ["max"], budget=budget)


def test_no_new_point_once_the_trials_spent_the_budget_but_the_drawn_point_runs_all_its_seeds(tmp_path):
    searcher = _budgeted(100.0)
    first = searcher.suggest("t0")
    searcher.on_trial_result("t0", {"epoch": 1, "train_flops": 60.0})
    searcher.on_trial_result("t0", {"epoch": 2, "train_flops": 120.0})  # cumulative: 120, not 180
    assert searcher.budget.spent == 120.0
    second = searcher.suggest("t1")  # the point's other seed still runs
    assert second == {**first, "seed": 1}
    assert searcher.suggest("t2") is Searcher.FINISHED


def test_a_search_under_budget_draws_and_the_budget_survives_a_restore(tmp_path):
    searcher = _budgeted(1000.0)
    searcher.suggest("t0")
    searcher.on_trial_complete("t0", {"val_top1": 0.5, "train_flops": 400.0, "failure_reason": ""})
    searcher.save(str(tmp_path / "s.pkl"))
    restored = ReplicatedSearcher(RecordingSearcher(), [0, 1], ["val_top1"], ["max"])
    restored.restore(str(tmp_path / "s.pkl"))
    assert restored.budget.spent == 400.0
    assert isinstance(restored.suggest("t1"), dict)


def test_core_hours_are_wall_time_times_the_trials_cpus():
    budget = ComputeBudget("core_hours", 1.0, cpus=2.0)
    budget.observe("a", {"time_total_s": 900.0})
    budget.observe("b", {"time_total_s": 900.0})
    assert budget.spent == pytest.approx(1.0) and budget.spent_out()


def test_a_compute_budget_needs_no_num_samples_and_caps_the_points(tmp_path):
    study = write_study(
        tmp_path,
        "flops",
        space={"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
        search={"algorithm": "tpe", "budget": {"train_flops": 1.0e12}},
    )
    spec = load_study(study)
    assert spec.search.num_samples == BUDGET_MAX_SAMPLES
    assert budget_of(spec) == ComputeBudget("train_flops", 1.0e12, cpus=1.0)
    trials = load_study(study, ["search.budget={trials: 5}"])
    assert trials.search.num_samples == 5 and budget_of(trials) is None
    record = spent_by_results(
        spec, [{"trial_id": "a", "train_flops": 3.0}, {"trial_id": "b", "train_flops": 4.0}]
    )
    assert record == {"measure": "train_flops", "limit": 1.0e12, "spent": 7.0, "trials": 2}


@pytest.mark.parametrize(
    ("search", "line"),
    [
        (
            {"algorithm": "tpe", "budget": {}},
            "search.budget: give exactly one of trials, train_flops, core_hours",
        ),
        (
            {"algorithm": "tpe", "budget": {"trials": 4, "core_hours": 1}},
            "search.budget: give exactly one of trials, train_flops, core_hours (got trials, core_hours)",
        ),
        ({"algorithm": "tpe", "budget": {"train_flops": -1}}, "search.budget.train_flops"),
        (
            {"algorithm": "tpe", "num_samples": 3, "budget": {"trials": 4}},
            "search: num_samples (3) and budget.trials (4)",
        ),
        ({"algorithm": "grid", "budget": {"core_hours": 1}}, "search.budget: a grid runs every point"),
    ],
)
def test_bad_budgets_are_one_line_naming_the_key(tmp_path, search, line):
    space = {"model.width": {"choice": [8, 16]}}
    with pytest.raises(SpecError, match=line.replace("(", r"\(").replace(")", r"\)")):
        load_study(write_study(tmp_path, "bad", space=space, search=search))


def test_validate_states_the_budget_and_exits_2_on_a_bad_one(tmp_path):
    good = write_study(
        tmp_path,
        "hours",
        space={"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
        search={"algorithm": "gp", "budget": {"core_hours": 0.5}},
    )
    proc = vitscale("study", "validate", str(good), cwd=tmp_path)
    assert (
        "at most 1000 trials = 1000 gp samples x 1 seed, each search until 0.5 core_hours are spent"
        in proc.stdout
    )
    proc = vitscale(
        "study", "validate", str(good), "--set", "search.budget={flops: 3}", cwd=tmp_path, check=False
    )
    assert proc.returncode == 2 and "search.budget.flops" in proc.stderr + proc.stdout


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_each_comparison_arm_spends_its_own_flops_budget_and_the_record_states_it(tmp_path):
    """A discrete and an ODE arm (rk4 at step 0.25: 16 evaluations, several times the discrete
    arm's FLOPs per image) with one train_flops budget:
    each arm draws points until its own trials spent it, so the costlier arm runs fewer, and
    comparison.json states what each spent."""
    limit = 6.0e7  # a few tiny trials' worth of FLOPs for the discrete arm
    study = write_study(
        tmp_path,
        "budget-cmp",
        kind="comparison",
        arms={"model.mixer": ["attention"], "model.regime": ["discrete", "ode"]},
        reference={"model.regime": "discrete"},
        space={"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
        search={"algorithm": "random", "budget": {"train_flops": limit}, "max_concurrent_trials": 1},
        final={"seeds": [100]},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "r"),
        "--num-cpus", "1", "--quiet", "--set", "trial.model.width=8", "--set", "trial.data.num_train=128",
        "--set", "trial.data.num_val=64", "--set", "trial.train.epochs=1",
        "--set", "trial.model.ode={solver: rk4, step_size: 0.25}", cwd=tmp_path, timeout=1100,
    )  # fmt: skip
    [record] = (tmp_path / "r" / "budget-cmp").glob("*/comparison.json")
    choices = json.loads(record.read_text())["choices"]
    runs = child_runs(uri, "budget-cmp")
    counts = {}
    for key, choice in choices.items():
        budget = choice["budget"]
        tuning = sorted(
            (
                r
                for r in runs
                if r.data.tags.get("vitscale.arm") == key and r.data.tags["vitscale.phase"] == "tune"
            ),
            key=lambda r: r.info.start_time,
        )
        spent = sum(r.data.metrics["train_flops"] for r in tuning)
        assert budget["measure"] == "train_flops" and budget["spent"] == pytest.approx(spent)
        assert budget["spent"] >= limit  # drawn until spent ...
        assert spent - tuning[-1].data.metrics["train_flops"] < limit  # ... and not one point further
        counts[key.split("model.regime=")[1]] = len(tuning)
    assert counts["ode"] < counts["discrete"]
