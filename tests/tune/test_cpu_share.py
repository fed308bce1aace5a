"""Threads per trial x trials at once never exceed a node's CPUs: `tune.cpu_share` on real specs and
node resources, and `vitscale study run` refusing such a study in one line before any trial."""

from __future__ import annotations

import pytest
from study_helpers import TINY_TRIAL, vitscale, write_study

from vitscale.errors import UserError
from vitscale.study import validate_study
from vitscale.tune import cpu_share

TWO_CPUS = {"CPU": 2.0}


def spec(resources=None, search=None, train=None, space=None, arms=None, kind="train"):
    trial = {**TINY_TRIAL, "train": {**TINY_TRIAL["train"], **(train or {})}}
    raw = {
        "name": "share",
        "kind": kind,
        "trial": trial,
        "space": space or {"model.mixer": {"grid": ["attention", "ssog"]}},
        "search": {"algorithm": "grid", "seeds": [0, 1], **(search or {})},
        "resources": {"cpu": 1, "gpu": 0, **(resources or {})},
    }
    if arms:
        raw |= {
            "kind": "comparison",
            "arms": arms,
            "final": {"seeds": [5]},
            "reference": {"train.threads": 1},
            "search": {"algorithm": "random", "num_samples": 2},
        }
        raw["space"] = {"train.lr": {"loguniform": [1.0e-4, 1.0e-2]}}
    return validate_study(raw)


def refusal(study, nodes=(TWO_CPUS,), cores=None) -> str:
    with pytest.raises(UserError) as caught:
        cpu_share.check(study, nodes, cores)
    return str(caught.value)


def test_a_trial_runs_its_cpus_as_threads_and_ray_fits_trials_by_their_cpus():
    one_each = spec()
    assert cpu_share.threads_per_trial(one_each) == 1
    assert cpu_share.trials_at_once(one_each, TWO_CPUS) == 2
    cpu_share.check(one_each, [TWO_CPUS], cores=2)  # the shipped studies: 1 CPU, 1 thread, 2 at once
    assert cpu_share.threads_per_trial(spec(resources={"cpu": 2})) == 2
    assert cpu_share.trials_at_once(spec(search={"max_concurrent_trials": 1}), {"CPU": 64.0}) == 1
    assert cpu_share.trials_at_once(spec(), {"CPU": 64.0}) == 4  # no more than the trials planned
    gpu = spec(resources={"cpu": 0, "gpu": 1})
    assert cpu_share.trials_at_once(gpu, {"CPU": 8.0, "GPU": 2.0}) == 2
    assert cpu_share.trials_at_once(spec(resources={"cpu": 0}), TWO_CPUS) == 4


def test_threads_above_the_cpu_share_are_refused_naming_train_threads_unless_one_runs_at_a_time():
    line = refusal(spec(train={"threads": 2}))
    assert line.startswith("train.threads: 2 threads per trial x 2 trials at once"), line
    assert "4 threads on 2 CPUs" in line and "search.max_concurrent_trials at 1" in line, line
    assert "\n" not in line
    cpu_share.check(spec(train={"threads": 2}, search={"max_concurrent_trials": 1}), [TWO_CPUS])
    cpu_share.check(spec(train={"threads": 2}, search={"max_concurrent_trials": 2}), [{"CPU": 4.0}])  # 2 x 2
    searched = spec(space={"train.threads": {"grid": [1, 2]}})
    assert cpu_share.threads_per_trial(searched) == 2
    assert refusal(searched).startswith("train.threads: 2 threads per trial")
    armed = spec(arms={"train.threads": [1, 3]})
    assert cpu_share.threads_per_trial(armed) == 3


def test_a_fraction_or_no_cpu_per_trial_is_refused_naming_resources_cpu():
    line = refusal(spec(resources={"cpu": 0.5}))
    assert line.startswith("resources.cpu: 0.5 CPU per trial lets Ray run 4 trials at once"), line
    assert "resources.cpu: 1 or more" in line and "search.max_concurrent_trials at 2" in line, line
    line = refusal(spec(resources={"cpu": 0}, search={"seeds": list(range(8))}))
    assert "trials at once" in line and "search.max_concurrent_trials at 2" in line, line
    cpu_share.check(spec(resources={"cpu": 0.5}, search={"max_concurrent_trials": 2}), [TWO_CPUS])


def test_in_process_ray_given_more_cpus_than_cores_is_refused_naming_num_cpus():
    line = refusal(spec(), nodes=[{"CPU": 4.0}], cores=2)
    assert line.startswith("--num-cpus: Ray was given 4 CPUs on this machine's 2 usable cores"), line
    assert "--num-cpus 2 or less" in line, line
    cpu_share.check(spec(), [{"CPU": 4.0}], cores=4)
    cpu_share.check(spec(search={"max_concurrent_trials": 2}), [{"CPU": 4.0}], cores=2)
    cpu_share.check(spec(), [{"CPU": 4.0}], cores=None)  # a cluster: Ray's count alone


@pytest.mark.slow
def test_study_run_refuses_oversubscribed_threads_before_any_trial(tmp_path):
    study = write_study(
        tmp_path, "share-cli", space={"model.mixer": {"grid": ["attention", "ssog"]}},
        search={"algorithm": "grid", "max_concurrent_trials": 2},
    )  # fmt: skip
    proc = vitscale(
        "study", "run", str(study), "--num-cpus", "2", "--storage", str(tmp_path / "results"),
        "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--set", "trial.train.threads=2",
        "--quiet", cwd=tmp_path, check=False,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert len(errors) == 1 and errors[0].startswith("error: train.threads: 2 threads per trial"), errors
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results" / "share-cli").exists()  # refused before its execution folder
