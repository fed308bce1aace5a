"""(slow) What one small tuned comparison leaves for people to read, end to end on real Ray,
MLflow and Optuna: the parent run carries the study's params and per-arm seed-mean metrics, the
experiment its description, every trial's stdout its training lines, each arm its own named
Optuna study that `vitscale dashboard` finds; a resume of the finished study runs nothing and
leaves the parent's end time where it was."""

from __future__ import annotations

from pathlib import Path

import pytest
from mlflow import MlflowClient
from study_helpers import arm_optuna_studies, child_runs, parent_runs, vitscale, write_study

from vitscale.cli.dashboard_cmd import choose_study

COMPARISON = {
    "description": "Two arms, two TPE samples each, one final seed.",
    "kind": "comparison",
    "arms": {"model.mixer": ["attention", "ssog"]},
    "reference": {"model.mixer": "attention"},
    "space": {"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
    "search": {"algorithm": "tpe", "num_samples": 2, "seeds": [0], "max_concurrent_trials": 2},
    "final": {"seeds": [100]},
}


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_a_comparison_reads_as_the_study_in_mlflow_optuna_and_its_trial_logs(tmp_path):
    study = write_study(tmp_path, "cmp-record", **COMPARISON)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    common = ["--storage", str(results), "--num-cpus", "2", "--quiet"]
    vitscale("study", "run", str(study), "--tracking-uri", uri, *common, cwd=tmp_path)

    client = MlflowClient(tracking_uri=uri)
    [parent] = parent_runs(uri, "cmp-record")
    params, metrics = parent.data.params, parent.data.metrics
    assert params["study.kind"] == "comparison" and params["search.algorithm"] == "tpe"
    assert params["arms"] == "attention, ssog" and params["budget.trials"] == "6"
    assert (metrics["trials_planned"], metrics["trials_finished"], metrics["trials_failed"]) == (6, 6, 0)
    for arm in ("attention", "ssog"):
        assert 0 <= metrics[f"arm/{arm}/val_top1_mean"] <= 1 and metrics[f"arm/{arm}/n"] == 1
        assert 0 <= metrics[f"arm/{arm}/test_top1_mean"] <= 1
        assert 0 <= metrics[f"arm/{arm}/tuning_val_top1"] <= 1
    assert metrics["best_val_top1"] == max(
        metrics["arm/attention/val_top1_mean"], metrics["arm/ssog/val_top1_mean"]
    )
    experiment = client.get_experiment_by_name("cmp-record")
    assert experiment.tags["mlflow.note.content"] == COMPARISON["description"]

    runs = child_runs(uri, "cmp-record")
    assert len(runs) == 6
    for run in runs:  # the trial's own lines: its config, every epoch, test at a final run's last
        folder = tmp_path / "logs" / run.info.run_id
        folder.mkdir(parents=True)
        text = Path(client.download_artifacts(run.info.run_id, "logs/stdout", str(folder))).read_text()
        assert "trial {" in text and "epoch 1/2" in text, text
        final = run.data.tags["vitscale.phase"] == "final"  # tuning never scores a test image
        assert ("test_top1" in text.splitlines()[-1]) == final, text
        assert ("test_top1" in run.data.metrics) == final

    execution = results / "cmp-record" / (results / "cmp-record" / "latest").read_text().strip()
    names = arm_optuna_studies(execution, arms=2)
    assert names == ["cmp-record/attention", "cmp-record/ssog"]
    chosen, line = choose_study("cmp-record", str(results), "ssog")
    assert (chosen.label, chosen.folder, line) == ("ssog", "tune-1", None)

    ended = client.get_run(parent.info.run_id).info.end_time
    vitscale("study", "resume", "cmp-record", *common, cwd=tmp_path)
    after = client.get_run(parent.info.run_id)
    assert (after.info.status, after.info.end_time) == ("FINISHED", ended)
    assert {r.info.end_time for r in child_runs(uri, "cmp-record")} == {r.info.end_time for r in runs}
