"""PBT / PB2: the study's distributions in Ray's form, the population drawn up front, one
scheduler per arm, the lived schedule re-run by selection; and on real Ray a small two-arm PBT
study that exploits within each arm only and resumes after a killed driver."""

from __future__ import annotations

import json
import signal
import time
from types import SimpleNamespace

import pytest
from ray import tune
from study_helpers import child_runs, start_vitscale, vitscale, write_study

from vitscale.study import load_study
from vitscale.study.distributions import Param
from vitscale.tracking import layout
from vitscale.tune import tuner  # noqa: F401 (imports the schedulers, which register)
from vitscale.tune.arm_population import INITIAL, ArmPopulation, population_points, population_search
from vitscale.tune.mutations import KeepInSpace, pb2_bounds, pbt_mutations
from vitscale.tune.scheduler_registry import scheduler_kind
from vitscale.tune.selection import choose

LR = {"loguniform": [1.0e-3, 1.0e-2]}
TWO_ARMS = {"model.mixer": {"choice": ["attention", "ssog"]}, "train.lr": LR}


def _params(**raw) -> dict[str, Param]:
    return {k: Param.model_validate(v) for k, v in raw.items()}


def test_mutations_are_the_studys_distributions_in_rays_form():
    params = _params(
        **{
            "train.lr": LR,
            "train.weight_decay": {"choice": [0.0, 0.05, 0.1]},
            "train.grad_clip": {"uniform": [0.5, 2.0], "step": 0.5},
        }
    )
    forms = pbt_mutations(params)["point"]
    assert forms["train.weight_decay"] == [0.0, 0.05, 0.1]  # an exploit moves to a neighbour
    assert isinstance(forms["train.lr"], tune.search.sample.Float)
    assert (forms["train.lr"].lower, forms["train.lr"].upper) == (1.0e-3, 1.0e-2)
    ranges = _params(**{"train.lr": LR, "train.label_smoothing": {"uniform": [0.0, 0.2]}})
    assert pb2_bounds(ranges) == {
        "point": {"train.lr": [1.0e-3, 1.0e-2], "train.label_smoothing": [0.0, 0.2]}
    }


def test_perturbed_values_are_put_back_on_their_distribution():
    keep = KeepInSpace(_params(**{"train.lr": LR, "train.grad_clip": {"uniform": [0.5, 2.0], "step": 0.5}}))
    config = {"point": {"train.lr": 1.2e-2, "train.grad_clip": 1.3, "model.width": 16}, "seed": 0}
    assert keep(config) == {
        "point": {"train.lr": 1.0e-2, "train.grad_clip": 1.5, "model.width": 16},
        "seed": 0,
    }


def test_the_population_is_drawn_up_front_with_every_mutated_key(tmp_path):
    mutated = {"train.label_smoothing": {"uniform": [0.0, 0.2]}}
    spec = load_study(
        write_study(
            tmp_path,
            "pop",
            space=TWO_ARMS,
            search={"algorithm": "random", "num_samples": 5},
            scheduler={"type": "pbt", "hyperparam_mutations": mutated},
        )
    )
    points = population_points(spec)
    assert len(points) == 5 and points == population_points(spec)  # seeded: a resume draws them again
    assert all(set(p) == {"model.mixer", "train.lr", "train.label_smoothing"} for p in points)
    assert all(0.0 <= p["train.label_smoothing"] <= 0.2 for p in points)
    searcher, space, samples = population_search(spec)
    assert searcher is None and samples == 1  # Ray refuses a searcher beside PBT
    assert set(space) == {"point", "seed"}
    assert scheduler_kind(spec).extra_checkpoints(spec) == 1


class _Trial(SimpleNamespace):
    __hash__ = object.__hash__  # Tune's schedulers keep trials in sets

    def set_config(self, config):
        self.config = config


@pytest.mark.parametrize("kind", ["pbt", "pb2"])
def test_each_arm_has_its_own_population_scheduler_seeing_its_own_trials(tmp_path, kind):
    spec = load_study(
        write_study(
            tmp_path, "arms", space=TWO_ARMS, search={"algorithm": "random"}, scheduler={"type": kind}
        )
    )
    scheduler = scheduler_kind(spec).build(spec, "val_top1", "max", 2)
    assert isinstance(scheduler, ArmPopulation)
    trials = [
        _Trial(trial_id=f"t{i}", config={"point": {"model.mixer": m, "train.lr": 1e-3}, "seed": 0})
        for i, m in enumerate(["attention", "ssog", "attention"])
    ]
    controller = SimpleNamespace(
        get_trials=lambda: trials,
        get_live_trials=lambda: trials,
        search_alg=None,
    )
    for trial in trials:
        trial.run_metadata = SimpleNamespace(
            checkpoint_manager=SimpleNamespace(checkpoint_config=SimpleNamespace(num_to_keep=5))
        )
        trial.experiment_tag = trial.trial_id
        trial.evaluated_params = {}
        scheduler.on_trial_add(controller, trial)
    by_arm = {arm: sorted(t.trial_id for t in s._trial_state) for arm, s in scheduler._by_arm.items()}
    assert sorted(by_arm.values()) == [["t0", "t2"], ["t1"]]
    assert all(t.config[INITIAL] == t.config["point"] for t in trials)  # each member as drawn


def test_selection_re_runs_the_schedule_a_member_lived():
    lived = [
        {"epoch": 1, "values": {"train.lr": 1e-3}},
        {"epoch": 2, "values": {"train.lr": 2e-3}, "cloned_from": "t1"},
    ]
    result = SimpleNamespace(
        config={"point": {"train.lr": 2e-3}, "seed": 0},
        metrics={
            "val_top1": 0.5,
            "epoch": 3,
            layout.RESULT_PLANNED_EPOCHS: 3,
            layout.RESULT_SCHEDULE: json.dumps(lived),
        },
        error=None,
    )
    choice = choose([result], "a", {}, [0], "val_top1", "max")
    assert choice.point == {"train.lr": 2e-3, "train.schedule": lived}


@pytest.mark.slow
def test_a_two_arm_pbt_study_exploits_within_each_arm_and_resumes_after_a_killed_driver(tmp_path):
    study = write_study(
        tmp_path,
        "pbt-tiny",
        space=TWO_ARMS,
        search={"algorithm": "random", "num_samples": 4},  # all 4 alive; 2 CPUs: 2 train at a time
        scheduler={"type": "pbt", "perturbation_interval": 1, "quantile_fraction": 0.5},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    run = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(results), "--num-cpus", "2"]
    driver = start_vitscale(
        *run, "--quiet", "--set", "trial.train.epochs=5", cwd=tmp_path, start_new_session=True
    )
    try:
        deadline = time.time() + 400
        while time.time() < deadline:  # kill once some member has trained past an exploit point
            if any(_epochs(f) >= 3 for f in results.glob("pbt-tiny/*/*/result.json")):
                break
            assert driver.poll() is None, "the study ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("no member reached epoch 3 within 400 s")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()

    proc = vitscale(
        "study", "resume", "pbt-tiny", "--storage", str(results), "--num-cpus", "2", "--quiet", cwd=tmp_path
    )
    assert "4 finished" in proc.stdout
    runs = [r for r in child_runs(uri, "pbt-tiny") if r.data.tags["vitscale.status"] == "FINISHED"]
    assert len({r.data.tags["vitscale.trial_id"] for r in runs}) == len(runs) == 4
    arm_of = {r.data.tags["vitscale.trial_id"]: r.data.params["model.mixer"] for r in runs}
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exploits = 0
    for run_ in runs:
        steps = [m.step for m in client.get_metric_history(run_.info.run_id, "val_loss")]
        assert steps == [1, 2, 3, 4, 5]  # no lost and no doubled epochs
        if int(run_.data.tags.get(layout.EXPLOITS, 0)):
            path = client.download_artifacts(
                run_.info.run_id, layout.SCHEDULE_ARTIFACT, str(tmp_path / run_.info.run_id)
            )
            lived = json.loads(open(path).read())
            donors = [s["cloned_from"] for s in lived if "cloned_from" in s]
            assert donors and all(arm_of[d] == run_.data.params["model.mixer"] for d in donors)  # its own arm
            exploits += len(donors)
    assert exploits >= 1


def _epochs(result_file) -> int:
    try:
        lines = result_file.read_text().splitlines()
        return max((int(json.loads(line).get("epoch", 0)) for line in lines if line.strip()), default=0)
    except (OSError, ValueError):
        return 0
