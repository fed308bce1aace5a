"""A study kind from outside the package: `probe`, whose trials measure a model configuration's
size without training it. It is this file: its plain data (`KindData`), then one entry per layer
that runs it, each in that layer's table keyed by the kind's name (the study format's rules,
tune's runner, the parent run's summary, the analysis). Nothing else in vitscale changes, and a
kind missing an entry fails in one line naming it, before anything runs."""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import replace

import pytest
import yaml

from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.analysis.kinds.train import TRAIN_ANALYSIS
from vitscale.cli import main
from vitscale.kinds import STUDY_KINDS, KindData, KindError, check_complete, register_kind
from vitscale.kinds.table import TABLES
from vitscale.models.measure import describe_model
from vitscale.study import count_trials, grid_points, load_study, resolve_trial, spec_hash
from vitscale.study.check_benchmark import no_benchmark
from vitscale.study.check_comparison import comparison_keys_refused
from vitscale.study.checks import grid_problems, trial_space_problems
from vitscale.study.errors import Problem
from vitscale.study.kinds import STUDY_RULES, StudyRules, no_problems
from vitscale.study.kinds.train import BENCHMARK_READS, COMPARISON_READS
from vitscale.study.plan import points_line, points_times_seeds
from vitscale.study.resolve import space_points
from vitscale.tracking.layout import RESULT_FAILURE_REASON, RESULT_PLANNED_EPOCHS, run_values
from vitscale.tracking.parent_summary import PARENT_RUNS, ParentRun, best_metrics, nothing
from vitscale.tune.cpu_share import trial_threads
from vitscale.tune.kinds import TUNE_KINDS, TuneKind
from vitscale.tune.optuna_study import no_optuna_study
from vitscale.tune.run import resume_experiment, run_experiment
from vitscale.tune.status_from_mlflow import no_phase
from vitscale.tune.summary import first_objective, searched_best
from vitscale.tune.tuner import describe_train_trial, every_point_search, space_keys

PROBE_METRICS = ("params", "flops_per_image")

PROBE = KindData(
    name="probe",
    title="Size probe",
    trial_section="trial.train",
    default_objective=("params", "min"),
    analysis_steps=("aggregate_replicates", "fits_json"),
    report_sections=("configurations", "failures"),
    series_label="mixer",
    report_counts="{used} measured, {failed} failed, {killed} killed, {other} other",
    report_statistics="Sizes are counted, not trained: every configuration once per seed.",
    cli_counts="{runs} trial runs: {used} measured, {failed} failed, {killed_or_other} killed/other",
    failures=("Failed trials", "None: every configuration was counted.", (("trial_id", "trial"),)),
    summary_title="size",
    points_noun="size point",
)


def grid_only(spec, removed: frozenset[str]) -> Iterable[Problem]:
    if spec.search.algorithm != "grid":
        yield Problem("search.algorithm", "a probe counts every point of its space: use grid")


def probe_trial(config: dict, spec) -> None:
    """Build the trial's model, count it, report: nothing trains."""
    from ray import tune  # a Ray worker's import, as tune.trainable's

    model = resolve_trial(spec, config["point"], config["seed"]).model
    facts, _ = describe_model(model)
    metrics = {metric: float(facts[metric]) for metric in PROBE_METRICS}
    tune.report({**metrics, "epoch": 1, RESULT_PLANNED_EPOCHS: 1, RESULT_FAILURE_REASON: ""})


STUDY_ENTRY = StudyRules(
    checks=(
        (BENCHMARK_READS, no_benchmark),
        (COMPARISON_READS, comparison_keys_refused),
        (frozenset({"search"}), grid_only),
    ),
    space_checks=trial_space_problems,
    grid_checks=grid_problems,
    metrics=PROBE_METRICS,
    points=space_points,
    count=points_times_seeds,
    trials_line=points_line,
    run_defaults=no_problems,
)
TUNE_ENTRY = TuneKind(
    run=run_experiment,
    resume=resume_experiment,
    trial=probe_trial,
    describe=describe_train_trial,
    search=every_point_search,
    reported_keys=space_keys,
    reuse_workers=True,
    best_of=first_objective,
    best=searched_best,
    threads=trial_threads,
    status_phase=no_phase,
    uses_optuna=no_optuna_study,
)
PARENT_ENTRY = ParentRun(params=nothing, metrics=best_metrics)
ANALYSIS_ENTRY = replace(TRAIN_ANALYSIS)

ENTRIES = ((STUDY_RULES, STUDY_ENTRY), (TUNE_KINDS, TUNE_ENTRY), (PARENT_RUNS, PARENT_ENTRY))


def _register(*entries) -> None:
    register_kind(PROBE)
    for table, entry in entries:
        table.register("probe", entry)


@pytest.fixture
def probe():
    """The kind registered with every entry, for this test only."""
    _register(*ENTRIES, (ANALYSIS_KINDS, ANALYSIS_ENTRY))
    yield
    _unregister()


@pytest.fixture
def unregister():
    yield
    _unregister()


def _unregister() -> None:
    STUDY_KINDS.pop("probe", None)
    for table in TABLES:
        dict.pop(table, "probe", None)


def _study(tmp_path, **more):
    study = {
        "name": "probe-sizes",
        "kind": "probe",
        "trial": {
            "model": {"width": 16, "depth": 1, "heads": 2, "patch_size": 4},
            "data": {"dataset": "digits", "resolution": 16},
            "train": {"device": "cpu"},
        },
        "space": {"model.mixer": {"choice": ["attention", "ssog"]}, "model.width": {"choice": [16, 32]}},
        "resources": {"cpu": 1, "gpu": 0},
        **more,
    }
    path = tmp_path / "probe.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main([*argv])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return info.value.code or 0, out, err


def test_a_probe_study_validates_resolves_and_plans(probe, tmp_path, capsys):
    path = _study(tmp_path)
    code, out, err = _cli(capsys, "study", "validate", str(path))
    assert (code, err) == (0, "")
    assert out == f"OK {path}: study probe-sizes (probe, grid): 4 trials = 4 size points x 1 seed\n"
    spec = load_study(path)
    assert (spec.objectives[0].metric, spec.objectives[0].mode) == ("params", "min")
    points = grid_points(spec)
    assert count_trials(spec) == 4 and len(points) == 4
    widths = [resolve_trial(spec, point, 0).model.width for point in points]
    assert widths == [16, 32, 16, 32] and len(spec_hash(spec)) == 16
    check_complete("probe")


def test_a_probe_keeps_its_own_rules_in_one_line_each(probe, tmp_path, capsys):
    path = _study(tmp_path, search={"algorithm": "tpe"}, objectives=[{"metric": "val_top1"}])
    code, out, err = _cli(capsys, "study", "validate", str(path))
    assert code == 2
    lines = err.strip().splitlines()
    assert any(
        line.endswith("search.algorithm: a probe counts every point of its space: use grid") for line in lines
    )
    assert any(
        "objectives[0].metric: unknown metric 'val_top1'; the probe metrics are: params, flops_per_image"
        in line
        for line in lines
    ), lines


def test_kind_probe_is_unknown_until_registered(tmp_path, capsys):
    code, _, err = _cli(capsys, "study", "validate", str(_study(tmp_path)))
    assert code == 2 and "kind: Input should be 'train', 'benchmark' or 'comparison'" in err


def test_a_kind_without_the_study_rules_fails_validation_in_one_line(unregister, tmp_path, capsys):
    _register()  # the kind's data only
    code, out, err = _cli(capsys, "study", "validate", str(_study(tmp_path)))
    assert code == 2 and out == ""
    assert err == (
        "error: study kind 'probe' has no study rules (vitscale.study.kinds.StudyRules); register one "
        "with vitscale.study.kinds.STUDY_RULES.register(name, StudyRules(...))\n"
    )


def test_a_kind_missing_a_layer_fails_before_anything_runs(unregister, tmp_path):
    import ray

    from vitscale.tune.run import run_study

    _register((STUDY_RULES, STUDY_ENTRY), (PARENT_RUNS, PARENT_ENTRY))  # no tune runner
    spec = load_study(_study(tmp_path))
    with pytest.raises(KindError) as err:
        run_study(spec, tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}", storage=str(tmp_path / "results"))
    message = str(err.value)  # every table this process imported that lacks it (analysis too, here)
    assert message.startswith("study kind 'probe' is registered incompletely: it has no ")
    assert "no tune runner (vitscale.tune.kinds.TuneKind)" in message and "parent-run" not in message
    assert "\n" not in str(err.value)
    assert not ray.is_initialized() and not (tmp_path / "results").exists()


@pytest.mark.slow
def test_a_probe_study_runs_on_in_process_ray(probe, tmp_path):
    import os

    import ray
    from mlflow import MlflowClient
    from ray import cloudpickle  # Ray's own copy pickles the trainable

    from vitscale.tune.run import run_study

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # Ray's workers cannot import this file
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    spec = load_study(_study(tmp_path))
    saved = dict(os.environ)
    try:
        summary = run_study(spec, tracking_uri=uri, storage=str(tmp_path / "results"), num_cpus=1, verbose=0)
    finally:
        ray.shutdown()  # no in-process Ray (nor its RAY_* variables) for the tests that follow
        os.environ.clear()
        os.environ.update(saved)
        cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert summary.counts["finished"] == 4
    [best] = summary.best[None]
    assert best.label.endswith("w16")  # the smallest configuration: objective params, min
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("probe-sizes")
    [parent] = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'study'")
    assert parent.data.tags["vitscale.kind"] == "probe" and parent.data.params["study.kind"] == "probe"
    children = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'trial'")
    sizes = sorted(
        run_values(c.data.metrics, c.data.params)["params"] for c in children
    )  # a constant: a param
    assert len(sizes) == 4 and sizes[0] < sizes[-1]
    assert (
        best.means["params"] == parent.data.metrics["best_params"] == sizes[0]
        and parent.data.metrics["trials_finished"] == 4
    )
