"""The Optuna study of a sampler study: named after it, continued with --continue, start points
enqueued, user attributes linking each Optuna trial to its seeds and MLflow runs; and the MLflow
side every study gets (experiment kind, provenance, dataset inputs, description as note)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from study_helpers import REPO, arm_optuna_studies, parent_runs, vitscale

from vitscale.tune.optuna_study import DB_FILE, execution_storage
from vitscale.tune.storage import STATE_FILE

# ssog_search.yaml, tiny: digits 16x16, width 8-16, one epoch, 128 images.
TINY_SSOG = [
    "trial.model.depth=1",
    "trial.model.width=8",
    "trial.model.heads=2",
    "trial.model.ode.solver=euler",
    "trial.data.resolution=16",
    "trial.data.num_train=128",
    "trial.data.num_val=64",
    "trial.train.epochs=1",
    "space.model.width={choice: [8, 16]}",
    "search.max_concurrent_trials=1",
    "resources.cpu=1",
]


def _optuna_trials(root: Path, name: str) -> tuple[list, list[str]]:
    import optuna

    urls = []
    for folder in sorted((root / name).glob("2*")):
        urls.append(json.loads((folder / "vitscale-study.json").read_text())["optuna_storage"])
    study = optuna.load_study(study_name=name, storage=urls[-1])
    return study.get_trials(), urls


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_continue_adds_points_to_one_optuna_study_the_sampler_sees_the_earlier_ones(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    study = REPO / "studies" / "ssog_search.yaml"
    common = ["--tracking-uri", uri, "--storage", str(tmp_path / "results"), "--num-cpus", "1", "--quiet"]
    for item in TINY_SSOG:
        common += ["--set", item]
    start = "search.start_points=[{model.width: 16, model.regime: discrete, train.lr: 0.002}]"
    vitscale(
        "study", "run", str(study), *common, "--set", "search.num_samples=4", "--set", start, cwd=tmp_path
    )
    vitscale("study", "run", str(study), *common, "--set", "search.num_samples=4", "--continue", cwd=tmp_path)

    trials, urls = _optuna_trials(tmp_path / "results", "ssog-search")
    assert len(urls) == 2 and urls[0] == urls[1]  # the second execution used the first's study
    assert [t.state.name for t in trials] == ["COMPLETE"] * 8
    assert trials[0].params["model.width"] == "16" or trials[0].params["model.width"] == 16
    assert trials[0].params["train.lr"] == pytest.approx(0.002)  # the enqueued start point first
    seen = [t.user_attrs["completed_trials_seen"] for t in trials[4:]]
    assert min(seen) >= 4, seen  # the continued sampler learned from the first four
    parents = {p.info.run_id for p in parent_runs(uri, "ssog-search")}
    for trial in trials:
        assert trial.user_attrs["seeds"] == [0]
        assert len(trial.user_attrs["mlflow_run_ids"]) == 1
        assert trial.user_attrs["mlflow_parent_run_id"] in parents

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("ssog-search")
    assert experiment.tags["mlflow.experimentKind"] == "custom_model_development"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    run = client.get_run(trials[0].user_attrs["mlflow_run_ids"][0])
    for tags in (run.data.tags, client.get_run(trials[0].user_attrs["mlflow_parent_run_id"]).data.tags):
        assert tags["mlflow.source.git.commit"] == head
        assert tags["mlflow.source.name"] == str(study)
        assert tags["vitscale.git.dirty"] in ("true", "false")
    contexts = {i.tags[0].value: i.dataset for i in run.inputs.dataset_inputs}
    assert set(contexts) == {"train", "validation", "test"}
    assert json.loads(contexts["train"].profile)["num_rows"] == 128
    parent = client.get_run(trials[0].user_attrs["mlflow_parent_run_id"])
    assert parent.data.tags["mlflow.note.content"].startswith("TPE over SSoG")
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id)}
    assert {"requirements.txt", "spec.yaml"} <= artifacts


def test_continue_without_an_earlier_execution_is_one_line(tmp_path):
    study = REPO / "studies" / "ssog_search.yaml"
    proc = vitscale(
        "study", "run", str(study), "--storage", str(tmp_path), "--continue",
        "--tracking-uri", f"sqlite:///{tmp_path / 'm.db'}", cwd=tmp_path, check=False,
    )  # fmt: skip
    assert proc.returncode == 2 and "--continue: no earlier execution of ssog-search" in proc.stderr


def test_start_points_outside_the_space_are_refused(tmp_path):
    from vitscale.errors import UserError
    from vitscale.study import load_study
    from vitscale.tune.optuna_study import start_points

    spec = load_study(REPO / "studies" / "ssog_search.yaml", ["search.start_points=[{model.depth: 3}]"])
    with pytest.raises(UserError, match=r"search.start_points\[0\].model.depth: not a key of space"):
        start_points(spec)
    spec = load_study(REPO / "studies" / "ssog_search.yaml", ["search.start_points=[{model.width: 7}]"])
    with pytest.raises(UserError, match="not one of its values"):
        start_points(spec)


def test_tpe_lies_about_running_trials_only_when_they_run_side_by_side():
    from vitscale.tune.samplers import SAMPLERS

    assert SAMPLERS["tpe"](0, 1, concurrent=True)._constant_liar
    assert not SAMPLERS["tpe"](0, 1, concurrent=False)._constant_liar


def test_execution_storage_reads_the_recorded_rdb_else_the_default_file(tmp_path):
    """What `vitscale dashboard` and `--continue` open: the URL the execution recorded, else its
    optuna.db, else nothing (a grid study)."""
    recorded, default, grid = (tmp_path / name for name in ("recorded", "default", "grid"))
    for folder in (recorded, default, grid):
        folder.mkdir()
    (recorded / STATE_FILE).write_text(json.dumps({"optuna_storage": "postgresql://db/optuna"}))
    (default / STATE_FILE).write_text(json.dumps({"optuna_storage": ""}))
    (default / DB_FILE).write_bytes(b"")
    assert execution_storage(recorded) == "postgresql://db/optuna"
    assert execution_storage(default) == f"sqlite:///{default / DB_FILE}"
    assert execution_storage(grid) == ""


def test_every_sampler_the_spec_accepts_is_registered_and_every_registered_one_accepted():
    """The spec's `search.algorithm` Literal sits below tune in the layering, so it cannot read
    SAMPLERS: this test is what keeps the two lists one (a new sampler = its function + both names)."""
    from typing import get_args

    import optuna

    from vitscale.study.spec import SearchConfig
    from vitscale.tune.samplers import SAMPLERS

    accepted = set(get_args(SearchConfig.model_fields["algorithm"].annotation))
    assert accepted == set(SAMPLERS) | {"grid"}
    assert all(isinstance(make(0, 1), optuna.samplers.BaseSampler) for make in SAMPLERS.values())


def _comparison_execution(root: Path, shared: bool = False) -> Path:
    """An execution folder of tuned_quickstart as a run leaves it: its record, and one Optuna
    study per arm made by `prepare` under the arm's name (two arms here), in the execution's one
    optuna.db (`shared`, as executions keep them now) or, as they did before, in tune-<i>/optuna.db."""
    from vitscale.study import load_study
    from vitscale.study.comparison import arm_list, arm_study
    from vitscale.tune.optuna_study import prepare, study_name

    spec = load_study(REPO / "studies" / "tuned_quickstart.yaml")
    folder = root / spec.name / "20260101-000000"
    folder.mkdir(parents=True)
    storage = f"sqlite:///{folder / DB_FILE}" if shared else ""
    (folder / STATE_FILE).write_text(
        json.dumps({"spec": spec.model_dump(mode="json"), "optuna_storage": storage})
    )
    (root / spec.name / "latest").write_text(folder.name + "\n")
    for i, arm in enumerate(arm_list(spec)[:2]):
        (folder / f"tune-{i}").mkdir()
        url = storage or f"sqlite:///{folder / f'tune-{i}' / DB_FILE}"
        prepare(arm_study(spec, arm), url, study_name(spec.name, arm))
    return folder


def test_each_comparison_arm_has_its_own_named_optuna_study_in_one_storage(tmp_path):
    names = arm_optuna_studies(_comparison_execution(tmp_path, shared=True), arms=2)
    assert names == ["tuned-quickstart/attention · discrete", "tuned-quickstart/attention · ode"]


def test_the_dashboard_opens_the_storage_of_all_arms_or_one_arm_on_its_page(tmp_path):
    from vitscale.cli.dashboard_cmd import choose_study
    from vitscale.tune.optuna_study import dashboard_studies

    folder = _comparison_execution(tmp_path, shared=True)
    studies = dashboard_studies(folder)
    url = f"sqlite:///{folder / DB_FILE}"
    assert [(s.label, s.folder, s.url, s.page) for s in studies] == [
        ("attention · discrete", "tune-0", url, "dashboard/studies/1"),
        ("attention · ode", "tune-1", url, "dashboard/studies/2"),
    ]
    both, line = choose_study("tuned-quickstart", str(tmp_path), None)
    assert (both.url, both.page, both.label) == (url, "", "2 arms")
    assert line == "2 arms: attention · discrete, attention · ode"
    assert choose_study("tuned-quickstart", str(tmp_path), "attention/ode") == (studies[1], None)
    assert choose_study(str(folder / "tune-0"), None, None) == (studies[0], None)


def test_the_dashboard_finds_every_arm_of_an_older_comparison_in_its_phase_folders(tmp_path):
    from vitscale.cli.dashboard_cmd import choose_study
    from vitscale.tune.optuna_study import dashboard_studies

    folder = _comparison_execution(tmp_path)
    studies = dashboard_studies(folder)
    assert [(s.label, s.folder) for s in studies] == [
        ("attention · discrete", "tune-0"),
        ("attention · ode", "tune-1"),
    ]
    chosen, line = choose_study("tuned-quickstart", str(tmp_path), None)
    assert chosen == studies[0]  # the first arm, and one line naming them all
    assert (
        line
        == "2 arms: attention · discrete, attention · ode; showing attention · discrete (another: --arm NAME)"
    )
    for arm in ("attention/ode", "attention · ode", "model.mixer=attention,model.regime=ode", "tune-1"):
        assert choose_study("tuned-quickstart", str(tmp_path), arm) == (studies[1], None), arm
    # A phase folder given as the target is that arm, not `<storage>/<folder>/latest`.
    assert choose_study(str(folder / "tune-1"), None, None) == (studies[1], None)
    assert choose_study(str(folder), None, None)[0] == studies[0]


def test_an_arm_the_comparison_does_not_have_is_one_line_naming_its_arms(tmp_path):
    from vitscale.cli.dashboard_cmd import choose_study
    from vitscale.errors import UserError

    _comparison_execution(tmp_path)
    with pytest.raises(
        UserError, match=r"--arm: 'ssog/ode' is not an arm .* attention · discrete, attention · ode"
    ):
        choose_study("tuned-quickstart", str(tmp_path), "ssog/ode")
