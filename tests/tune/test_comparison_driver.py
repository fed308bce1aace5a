"""The comparison driver on a fake Ray Tune (tests/tune/fake_tune.py), in seconds: the phases in
order, the arm's choice carried into its final runs, the parent run's record, and resume after a
driver died in each phase: finished phases skipped, the interrupted one continued, nothing run
twice, and a resume of a finished study leaving its end time. The MLflow store, the execution
folder, the record and the driver are real; the trials are a function of their learning rate.
(The same on real Ray, once each: test_comparison.py's kill and resume, test_confirmation.py's
tiny comparison.)"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from fake_tune import DriverKilled, FakeTune
from mlflow import MlflowClient
from study_helpers import child_runs, parent_runs, write_study

from vitscale.study import load_study
from vitscale.tracking import layout
from vitscale.tune.run import resume_study, run_study
from vitscale.tune.tuned_from import borrowed_choices

COMPARISON = {
    "description": "Two arms, two samples each, two final seeds.",
    "kind": "comparison",
    "arms": {"model.mixer": ["attention", "ssog"]},
    "reference": {"model.mixer": "attention"},
    "space": {"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
    "search": {"algorithm": "random", "num_samples": 3, "seeds": [0], "max_concurrent_trials": 2},
    "final": {"seeds": [100, 101]},
}
ARMS = ("model.mixer=attention", "model.mixer=ssog")


def score(phase: str, trial) -> float:
    """attention learns best at its highest sampled lr, ssog at its lowest; seeds differ a little."""
    lr = trial.train.lr
    base = 0.5 + 20 * lr if trial.model.mixer == "attention" else 0.9 - 20 * lr
    return base + 0.001 * (trial.train.seed % 7)


@pytest.fixture
def study(tmp_path, monkeypatch):
    """run(fake, **changes) / resume(fake): the real driver on a fake Tune, in tmp_path."""
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"

    def run(fake, name="cmp", **changes):
        fake.install(monkeypatch)
        spec = load_study(write_study(tmp_path, name, **{**COMPARISON, **changes}))
        return run_study(spec, tracking_uri=uri, storage=str(tmp_path / "results"), verbose=0)

    def resume(fake, name="cmp"):
        fake.install(monkeypatch)
        return resume_study(name, storage=str(tmp_path / "results"), verbose=0)

    return type(
        "Study", (), {"run": staticmethod(run), "resume": staticmethod(resume), "uri": uri, "root": tmp_path}
    )


def _tuned_lrs(uri: str, study: str) -> dict[str, list[float]]:
    lrs: dict[str, list[float]] = {}
    for run in child_runs(uri, study):
        if run.data.tags[layout.PHASE] == "tune":
            lrs.setdefault(run.data.tags[layout.ARM], []).append(float(run.data.params["train.lr"]))
    return lrs


def _finished(uri: str, study: str) -> Counter:
    return Counter(
        (r.data.tags[layout.PHASE], r.data.tags[layout.ARM])
        for r in child_runs(uri, study)
        if r.data.tags[layout.STATUS] == "FINISHED"
    )


PLAN = {**{("tune", arm): 3 for arm in ARMS}, **{("final", arm): 2 for arm in ARMS}}


def test_each_arm_tunes_then_its_best_point_runs_the_final_seeds_and_the_parent_reads_as_the_study(study):
    fake = FakeTune(score)
    summary = study.run(fake)
    assert fake.fits == ["tune-0", "tune-1", "final"]
    assert _finished(study.uri, "cmp") == PLAN and summary.counts["finished"] == 10
    tuned = _tuned_lrs(study.uri, "cmp")
    chosen = {ARMS[0]: max(tuned[ARMS[0]]), ARMS[1]: min(tuned[ARMS[1]])}  # by validation, per arm
    finals = [r for r in child_runs(study.uri, "cmp") if r.data.tags[layout.PHASE] == "final"]
    assert sorted((r.data.tags[layout.ARM], r.data.params["train.seed"]) for r in finals) == [
        (arm, seed) for arm in ARMS for seed in ("100", "101")
    ]
    for run in finals:
        assert float(run.data.params["train.lr"]) == pytest.approx(chosen[run.data.tags[layout.ARM]])
    rows = {row["arm"]: row for row in summary.arms}
    for arm in ARMS:
        assert rows[arm]["point"]["train.lr"] == pytest.approx(chosen[arm]) and rows[arm]["final_runs"] == 2
        base = 0.5 + 20 * chosen[arm] if arm == ARMS[0] else 0.9 - 20 * chosen[arm]
        assert rows[arm]["val_top1"] == pytest.approx(base + 0.001 * (100 % 7 + 101 % 7) / 2)

    client = MlflowClient(tracking_uri=study.uri)
    [parent] = parent_runs(study.uri, "cmp")
    params, metrics = parent.data.params, parent.data.metrics
    assert params["study.kind"] == "comparison" and params["arms"] == "attention, ssog"
    assert params["budget.trials"] == "10" and params["final.seeds"] == "100,101"
    assert (metrics["trials_planned"], metrics["trials_finished"], metrics["trials_failed"]) == (10, 10, 0)
    for arm in ("attention", "ssog"):
        assert metrics[f"arm/{arm}/val_top1_mean"] == pytest.approx(rows[f"model.mixer={arm}"]["val_top1"])
        assert metrics[f"arm/{arm}/n"] == 2 and f"arm/{arm}/test_top1_mean" in metrics
        assert metrics[f"arm/{arm}/tuning_val_top1"] == pytest.approx(
            rows[f"model.mixer={arm}"]["tuning_score"]
        )
    assert metrics["best_val_top1"] == max(
        metrics["arm/attention/val_top1_mean"], metrics["arm/ssog/val_top1_mean"]
    )
    assert json.loads(parent.data.tags[layout.REFERENCE]) == {"model.mixer": "attention"}
    assert client.get_experiment_by_name("cmp").tags["mlflow.note.content"] == COMPARISON["description"]
    record = json.loads(
        Path(
            client.download_artifacts(parent.info.run_id, layout.COMPARISON_ARTIFACT, str(study.root))
        ).read_text()
    )
    assert record["final_done"] and set(record["choices"]) == set(ARMS)
    follow_up = {k: v for k, v in COMPARISON.items() if k not in ("space", "search")}
    follow_up |= {"tuned_from": "cmp", "search": {"algorithm": "grid"}, "final": {"seeds": [200]}}
    borrowed, _ = borrowed_choices(load_study(write_study(study.root, "follow", **follow_up)), study.uri)
    borrowed_lrs = {arm: c["point"]["train.lr"] for arm, c in borrowed.items()}
    assert borrowed_lrs == pytest.approx(chosen)  # what a tuned_from follow-up re-runs

    # A resume of the finished study runs nothing and leaves every end time where it was.
    ended = {r.info.run_id: r.info.end_time for r in [parent, *child_runs(study.uri, "cmp")]}
    study.resume(fake)
    assert fake.fits == ["tune-0", "tune-1", "final"]
    after = {
        r.info.run_id: r.info.end_time
        for r in [client.get_run(parent.info.run_id), *child_runs(study.uri, "cmp")]
    }
    assert after == ended and client.get_run(parent.info.run_id).info.status == "FINISHED"


@pytest.mark.parametrize(
    ("kill_at", "fits"),
    [
        (("tune-1", 1), ["tune-0", "tune-1", "tune-1", "final"]),
        (("final", 1), ["tune-0", "tune-1", "final", "final"]),
    ],
)
def test_a_driver_killed_in_a_phase_resumes_there_and_finishes_exactly_the_plan(study, kill_at, fits):
    fake = FakeTune(score, kill_at=kill_at)
    with pytest.raises(DriverKilled):
        study.run(fake)
    phase = "final" if kill_at[0] == "final" else "tune"
    running = [r for r in child_runs(study.uri, "cmp") if r.data.tags[layout.STATUS] == "RUNNING"]
    assert [r.data.tags[layout.PHASE] for r in running] == [phase]  # the trial the driver died in
    summary = study.resume(fake)
    assert fake.fits == fits  # finished phases are not fitted again; the killed one continues
    assert _finished(study.uri, "cmp") == PLAN  # the restarted trial kept its run: none twice
    assert len(child_runs(study.uri, "cmp")) == 10 and summary.counts["finished"] == 10
    [parent] = parent_runs(study.uri, "cmp")
    assert parent.info.status == "FINISHED" and parent.data.metrics["trials_finished"] == 10


def test_a_driver_killed_while_confirming_keeps_the_arms_tuning_and_confirms_on_resume(study):
    """Tuned at a fidelity: each arm's top 3 points re-run at full fidelity; killed in the second
    arm's confirmation, the resume re-tunes nothing and the choice comes from full fidelity."""
    search = {
        **COMPARISON["search"],
        "num_samples": 4,
        "fidelity": {"train.epochs": 1},
        "confirm": {"top_k": 3},
    }

    def full_fidelity_reverses(phase, trial):  # the low-fidelity ranking inverts at full fidelity
        value = score(phase, trial)
        return 1.4 - value if phase.startswith("confirm") else value

    fake = FakeTune(full_fidelity_reverses, kill_at=("confirm-1", 1))
    with pytest.raises(DriverKilled):
        study.run(fake, search=search)
    execution = next(p for p in (study.root / "results" / "cmp").iterdir() if p.is_dir())
    record = json.loads((execution / "comparison.json").read_text())
    assert list(record["choices"]) == [ARMS[0]] and ARMS[1] in record["low_fidelity"]  # tuned, unconfirmed
    study.resume(fake, "cmp")
    assert fake.fits == ["tune-0", "confirm-0", "tune-1", "confirm-1", "confirm-1", "final"]
    assert _finished(study.uri, "cmp") == {
        **{("tune", arm): 4 for arm in ARMS},
        **{("confirm", arm): 3 for arm in ARMS},
        **{("final", arm): 2 for arm in ARMS},
    }
    record = json.loads((execution / "comparison.json").read_text())
    for arm in ARMS:
        c = record["choices"][arm]["confirmation"]
        assert c["n"] == 3 and c["rho"] == pytest.approx(-1.0) and c["changed"]  # reversed: the last of 3
        chosen = next(p for p in c["points"] if p["chosen"])
        assert chosen["low_rank"] == 3 and record["choices"][arm]["point"] == chosen["point"]
    [parent] = parent_runs(study.uri, "cmp")
    assert set(json.loads(parent.data.tags[layout.RANK_TRANSFER])) == set(ARMS)


def test_an_arm_whose_every_tuning_trial_diverged_gets_no_final_runs(study):
    def ssog_diverges(phase, trial):
        return None if trial.model.mixer == "ssog" else score(phase, trial)

    summary = study.run(FakeTune(ssog_diverges))
    rows = {row["arm"]: row for row in summary.arms}
    assert rows[ARMS[1]]["point"] is None and rows[ARMS[1]]["final_runs"] == 0
    assert rows[ARMS[0]]["final_runs"] == 2
    assert summary.counts == {"finished": 5, "stopped_early": 0, "failed": 3, "killed": 0, "total": 8}
    failed = [r for r in child_runs(study.uri, "cmp") if r.data.tags[layout.STATUS] == "FAILED"]
    assert {r.data.tags[layout.FAILURE_REASON] for r in failed} == {"diverged"}
