"""`tuned_from`: a comparison that re-runs the points an earlier comparison tuned for its arms.

A source comparison written by hand into a real MLflow store (a parent run with the
`comparison.json` and `spec.yaml` artifacts the driver logs); end to end (slow), a follow-up on
real Ray whose arms add training resolutions and evaluate at other sides, analysed into accuracy
at resolution."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from study_helpers import child_runs, parent_runs, vitscale, write_study

from vitscale.errors import UserError
from vitscale.study import SpecError, count_trials, load_study
from vitscale.tracking import layout
from vitscale.tune.tuned_from import borrowed_choices

SOURCE = "src-cmp"
POINTS = {
    "model.mixer=attention": {"train.lr": 0.004, "model.attention.qk_norm": True},
    "model.mixer=ssog": {"train.lr": 0.002, "model.ssog.kernel_lr_scale": 5.0},
}
FOLLOW_UP = {
    "kind": "comparison",
    "tuned_from": SOURCE,
    "arms": {"model.mixer": ["attention", "ssog"], "data.train_resolutions": [[16], [16, 24]]},
    "reference": {"model.mixer": "attention"},
    "search": {"algorithm": "grid", "max_concurrent_trials": 2},
    "final": {"seeds": [100]},
}


def _source_store(tmp_path, status: str = "FINISHED", seeds=(0,)) -> str:
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(SOURCE, artifact_location=(tmp_path / "artifacts").as_uri())
    run = client.create_run(
        exp, tags={layout.ROLE: "study", layout.STUDY: SOURCE, layout.KIND: "comparison"}
    ).info.run_id
    choices = {
        arm: {"arm": arm, "values": layout.parse_arm(arm), "point": point, "score": 0.5}
        for arm, point in POINTS.items()
    }
    client.log_text(run, json.dumps({"choices": choices, "final_done": True}), "comparison.json")
    client.log_text(run, json.dumps({"name": SOURCE, "search": {"seeds": list(seeds)}}), "spec.yaml")
    client.set_terminated(run, status)
    return uri


def test_each_arm_takes_the_point_its_source_arm_was_tuned_to(tmp_path):
    uri = _source_store(tmp_path)
    spec = load_study(write_study(tmp_path, "follow", **FOLLOW_UP))
    choices, provenance = borrowed_choices(spec, uri)
    assert len(choices) == 4
    for key, choice in choices.items():
        values = layout.parse_arm(key)
        assert choice["point"] == POINTS[f"model.mixer={values['model.mixer']}"]
        assert choice["source_arm"] == f"model.mixer={values['model.mixer']}"
    assert "data.train_resolutions=16+24" in ",".join(choices)
    assert provenance["study"] == SOURCE and provenance["tuning_seeds"] == [0]
    assert count_trials(spec) == 4  # no tuning here: 4 arms x 1 final seed


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"tuned_from": "no-such-study"}, "tuned_from: no study 'no-such-study'"),
        (
            {"arms": {"model.regime": ["discrete", "ode"]}, "reference": {"model.regime": "discrete"}},
            "matches arm",
        ),
        ({"final": {"seeds": [0, 100]}}, "final.seeds: [0] tuned 'src-cmp'"),
    ],
)
def test_a_source_that_cannot_serve_is_refused_in_one_line(tmp_path, change, words):
    uri = _source_store(tmp_path)
    spec = load_study(write_study(tmp_path, "follow", **{**FOLLOW_UP, **change}))
    with pytest.raises(UserError) as err:
        borrowed_choices(spec, uri)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_an_unfinished_source_execution_is_not_borrowed_from(tmp_path):
    uri = _source_store(tmp_path, status="KILLED")
    spec = load_study(write_study(tmp_path, "follow", **FOLLOW_UP))
    with pytest.raises(UserError, match="no finished comparison execution"):
        borrowed_choices(spec, uri)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        ({"space": {"train.lr": {"loguniform": [1e-3, 1e-2]}}}, "space"),
        ({"kind": "train", "arms": None, "reference": None, "final": None}, "tuned_from"),
    ],
)
def test_tuned_from_with_a_space_or_outside_a_comparison_is_refused(tmp_path, change, key):
    with pytest.raises(SpecError) as err:
        load_study(write_study(tmp_path, "follow", **{**FOLLOW_UP, **change}))
    assert any(line.split(": ")[1] == key for line in err.value.lines), err.value.lines


@pytest.mark.slow
def test_a_follow_up_re_runs_the_tuned_points_across_resolutions_and_analyses_them(tmp_path):
    """The source comparison as its driver leaves it in MLflow (`_source_store`; that the driver
    records its choices so is test_comparison_driver.py's); the follow-up on real Ray."""
    uri = _source_store(tmp_path)
    results = tmp_path / "results"
    common = ["--tracking-uri", uri, "--storage", str(results), "--num-cpus", "2", "--quiet"]
    follow = write_study(
        tmp_path,
        "follow",
        **FOLLOW_UP,
        **{"trial": _with_eval_resolutions()},
    )
    vitscale("study", "run", str(follow), *common, cwd=tmp_path)

    [src_parent] = parent_runs(uri, SOURCE)
    [parent] = parent_runs(uri, "follow")
    assert json.loads(parent.data.tags[layout.TUNED_FROM])["run_id"] == src_parent.info.run_id
    runs = child_runs(uri, "follow")
    assert Counter(r.data.tags[layout.PHASE] for r in runs) == {"final": 4}  # nothing re-tuned
    assert {r.data.params["data.train_resolutions"] for r in runs} == {"[16]", "[16, 24]"}
    for r in runs:
        point = POINTS[f"model.mixer={r.data.params['model.mixer']}"]
        assert float(r.data.params["train.lr"]) == point["train.lr"]
        assert {"test_top1_at16", "test_top1_at24", "test_top1_at32"} <= set(r.data.metrics)
    proc = vitscale("analyze", "follow", "--tracking-uri", uri, "--out", str(tmp_path / "rep"), cwd=tmp_path)
    report = (tmp_path / "rep" / "report.md").read_text()
    assert "## Accuracy at each evaluation resolution" in report, proc.stdout
    assert (tmp_path / "rep" / "figures" / "accuracy_vs_resolution.png").is_file()


def _with_eval_resolutions() -> dict:
    from study_helpers import TINY_TRIAL

    trial = json.loads(json.dumps(TINY_TRIAL))
    trial["train"]["eval_resolutions"] = [16, 24, 32]
    return trial
