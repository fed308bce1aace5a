"""The study's parent run carries the study (params) and what it found (seed-mean metrics per
arm and overall, trial counts), read from its child runs in a real MLflow store; a resume that
runs nothing keeps its end time; the experiment's description is the study's."""

from __future__ import annotations

from pathlib import Path

import pytest

from vitscale.study import count_trials, load_study
from vitscale.tracking import layout, parent_summary, store

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    """One real SQLite store for the module (creating one takes seconds); one experiment per test."""
    return store.client_for(f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlflow.db'}")


_made = iter(range(1_000_000))


def _parent(client, kind="train", planned=0):
    name = f"study-{next(_made)}"
    experiment_id = store.ensure_experiment(client, name)
    parent = store.create_study_run(client, experiment_id, name, kind, "hash", f"name: {name}\n")
    store.set_tags(client, parent, {layout.PLANNED_TRIALS: planned})
    return experiment_id, parent


def _child(
    client, experiment_id, parent, trial, metrics, tags, params=None, status="FINISHED", stopped="false"
):
    """A trial's child run as the study callback leaves it: tags, params, final metrics, status."""
    tags = {layout.STATUS: status, layout.STOPPED_EARLY: stopped, **tags}
    run_id = store.create_child_run(client, experiment_id, parent, "s", "train", trial, trial, tags=tags)
    store.log_params(client, run_id, params or {})
    store.log_metrics(client, run_id, metrics, step=1)
    client.set_terminated(run_id, status)
    return run_id


def test_a_train_study_parent_gets_the_best_seed_mean_per_arm_and_overall(client):
    experiment_id, parent = _parent(client, planned=6)
    ssog = {"model.mixer": "ssog", "model.regime": "ode"}
    attention = {"model.mixer": "attention", "model.regime": "ode"}

    def config(key):
        return {layout.CONFIG_KEY: key}

    # ssog: config a has seeds 0.9 and 0.1 (mean 0.5), config b 0.6 and 0.6 (mean 0.6: the best).
    _child(client, experiment_id, parent, "1", {"val_top1": 0.9, "test_top1": 0.8}, config("a"), ssog)
    _child(client, experiment_id, parent, "2", {"val_top1": 0.1, "test_top1": 0.1}, config("a"), ssog)
    _child(client, experiment_id, parent, "3", {"val_top1": 0.6, "test_top1": 0.5}, config("b"), ssog)
    _child(client, experiment_id, parent, "4", {"val_top1": 0.6, "test_top1": 0.7}, config("b"), ssog)
    _child(client, experiment_id, parent, "5", {"val_top1": 0.4}, config("c"), attention)
    # Stopped early and failed runs are counted, never averaged in.
    _child(client, experiment_id, parent, "6", {"val_top1": 0.99}, config("d"), attention, stopped="true")
    _child(client, experiment_id, parent, "7", {"val_top1": 0.98}, config("e"), attention, status="FAILED")
    spec = load_study(REPO / "studies" / "quickstart.yaml")

    parent_summary.log_summary(client, experiment_id, parent, spec)

    metrics = client.get_run(parent).data.metrics
    assert metrics["best_val_top1"] == pytest.approx(0.6)
    assert metrics["best_test_top1"] == pytest.approx(0.6)
    assert metrics["best_n_seeds"] == 2
    assert metrics["arm/ssog_ode/val_top1_mean"] == pytest.approx(0.6)
    assert metrics["arm/ssog_ode/n"] == 2
    assert metrics["arm/attention_ode/val_top1_mean"] == pytest.approx(0.4)
    assert "arm/attention_ode/test_top1_mean" not in metrics  # its run has no test metric
    assert (metrics["trials_planned"], metrics["trials_finished"]) == (6, 5)
    assert (metrics["trials_stopped_early"], metrics["trials_failed"], metrics["trials_killed"]) == (1, 1, 0)


def test_a_comparison_parent_gets_each_arms_final_means_and_its_tuning_score(client):
    experiment_id, parent = _parent(client, kind="comparison", planned=5)
    ssog, attention = "model.mixer=ssog,model.regime=ode", "model.mixer=attention,model.regime=ode"

    def phase(name, arm, key):
        return {layout.PHASE: name, layout.ARM: arm, layout.CONFIG_KEY: key}

    _child(client, experiment_id, parent, "1", {"val_top1": 0.7}, phase("tune", ssog, "t"))
    _child(client, experiment_id, parent, "2", {"val_top1": 0.5, "test_top1": 0.4}, phase("final", ssog, "f"))
    _child(client, experiment_id, parent, "3", {"val_top1": 0.7, "test_top1": 0.6}, phase("final", ssog, "f"))
    _child(
        client,
        experiment_id,
        parent,
        "4",
        {"val_top1": 0.3, "test_top1": 0.2},
        phase("final", attention, "g"),
    )
    _child(
        client, experiment_id, parent, "5", {"val_top1": 0.9}, phase("tune", attention, "u"), stopped="true"
    )
    spec = load_study(REPO / "studies" / "tuned_quickstart.yaml")

    parent_summary.log_summary(client, experiment_id, parent, spec)

    metrics = client.get_run(parent).data.metrics
    assert metrics["arm/ssog_ode/val_top1_mean"] == pytest.approx(0.6)  # final runs only
    assert metrics["arm/ssog_ode/test_top1_mean"] == pytest.approx(0.5)
    assert metrics["arm/ssog_ode/n"] == 2
    assert metrics["arm/ssog_ode/tuning_val_top1"] == pytest.approx(0.7)
    assert metrics["arm/attention_ode/val_top1_mean"] == pytest.approx(0.3)
    assert "arm/attention_ode/tuning_val_top1" not in metrics  # its only tuning run stopped early
    assert metrics["best_val_top1"] == pytest.approx(0.6) and metrics["best_test_top1"] == pytest.approx(0.5)
    assert metrics["trials_finished"] == 4


def test_the_parent_params_describe_the_study_and_a_resume_adds_only_missing_ones(client):
    spec = load_study(REPO / "studies" / "tuned_quickstart.yaml")
    params = parent_summary.study_params(spec, count_trials(spec))
    assert params["study.kind"] == "comparison"
    assert params["search.algorithm"] == "tpe" and params["search.num_samples"] == "4"
    assert params["objectives"] == "val_top1:max"
    assert params["arms"] == "attention · discrete, attention · ode, ssog · discrete, ssog · ode"
    assert params["final.seeds"] == "100,101,102"
    assert params["budget.trials"] == str(count_trials(spec))
    _, parent = _parent(client)
    store.log_params(client, parent, {"study.kind": "comparison"})
    parent_summary.log_study_params(client, parent, params)  # would raise if it logged study.kind again
    assert client.get_run(parent).data.params == params


@pytest.mark.parametrize(
    ("tag", "label"),
    [("model.mixer=ssog,model.regime=ode", "ssog_ode"), ("data.train_resolutions=28+44", "28_44")],
)
def test_arm_names_become_metric_names_mlflow_accepts(client, tag, label):
    assert parent_summary.arm_metric_label(tag) == label
    _, parent = _parent(client)
    store.log_metrics(client, parent, {f"arm/{label}/val_top1_mean": 0.5}, step=0)  # MLflow validates


def test_a_resume_that_ran_nothing_keeps_the_parents_end_time(client):
    experiment_id, parent = _parent(client)
    child = _child(client, experiment_id, parent, "1", {"val_top1": 0.5}, {})
    client.set_terminated(parent, "FINISHED")
    ended = parent_summary.parent_end_time(client, parent)
    client.update_run(parent, status="RUNNING")  # what resume does, then the study ends again
    client.set_terminated(parent, "FINISHED", end_time=ended + 60_000)
    parent_summary.keep_end_time(client, experiment_id, parent, ended)
    assert client.get_run(parent).info.end_time == ended

    client.set_terminated(child, "FINISHED", end_time=ended + 30_000)  # a trial ran again
    client.set_terminated(parent, "FINISHED", end_time=ended + 60_000)
    parent_summary.keep_end_time(client, experiment_id, parent, ended)
    assert client.get_run(parent).info.end_time == ended + 60_000


def test_the_experiment_description_is_the_studys_unless_another_study_wrote_it(client):
    own = store.ensure_experiment(client, "described", "first words")
    assert client.get_experiment(own).tags[layout.NOTE] == "first words"
    store.ensure_experiment(client, "described", "new words")  # the study's own experiment follows its file
    assert client.get_experiment(own).tags[layout.NOTE] == "new words"
    store.ensure_experiment(client, "described", "another study's words", replace_description=False)
    assert client.get_experiment(own).tags[layout.NOTE] == "new words"
