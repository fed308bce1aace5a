"""Studies on an in-process Ray with a SQLite MLflow store: grid (its progress lines, `study
status`, and its concurrent trials' threads and OpenMP wait policy too), TPE, failures, preflight,
resume."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import time
from collections import Counter

import pytest
from mlflow import MlflowClient
from study_helpers import child_runs, parent_runs, start_vitscale, trial_stdout, vitscale, write_study

pytestmark = pytest.mark.slow


def study_run(study, uri: str, storage, *extra: str, cpus: int = 1) -> list[str]:
    """`vitscale study run STUDY` into the MLflow store `uri` and the folder `storage`, on `cpus` CPUs."""
    command = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(storage)]
    return [*command, "--num-cpus", str(cpus), *extra]


def test_grid_study_records_every_trial_and_a_diverging_one_fails_alone(tmp_path, monkeypatch):
    for name in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)  # the CLI's environment is this one's: vitscale sets them
    study = write_study(
        tmp_path,
        "grid-tiny",
        space={"model.mixer": {"grid": ["attention", "ssog"]}, "train.lr": {"grid": [3.0e-3, 1.0e30]}},
        search={"algorithm": "grid", "max_concurrent_trials": 2},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = vitscale(
        *study_run(
            study, uri, tmp_path / "results", "--quiet", "--set", "trial.train.grad_clip=null", cpus=2
        ),
        cwd=tmp_path,
        env={"RAY_ADDRESS": "127.0.0.1:9"},  # no --address: local, whatever cluster the shell names
    )
    assert "4 trials — 2 finished, 0 stopped early, 2 failed" in proc.stdout.replace("\n", " ")
    # --quiet: vitscale's progress lines, not Ray's status table; `study status` lists the study.
    lines = [line for line in proc.stdout.splitlines() if line.startswith("[grid-tiny] ")]
    assert lines[0].startswith("[grid-tiny] 0/4 done") and lines[0].endswith("ETA –"), proc.stdout
    progress = r"2/4 done · 0 running · 2 failed · best val_top1 \d\.\d{3} \(n=1\) .*lr=0\.003"
    assert re.search(progress, lines[-1]) and "ETA" in lines[-1] and "elapsed" in lines[-1], lines[-1]
    for ray_table in ("Trial status", "Result logdir", "Current time:", "+--"):
        assert ray_table not in proc.stdout + proc.stderr
    assert "best configuration" in proc.stdout and "lr=0.003" in proc.stdout.split("best configuration")[1]
    assert proc.stdout.strip().splitlines()[-1].startswith(f"execution folder: {tmp_path / 'results'}")
    status = vitscale("study", "status", "--storage", str(tmp_path / "results"), cwd=tmp_path).stdout
    [line] = status.strip().splitlines()
    assert re.match(r"\[grid-tiny\] " + progress, line) and "finished" in line and "ETA" not in line, line

    [parent] = parent_runs(uri, "grid-tiny")
    assert parent.data.tags["vitscale.kind"] == "train" and parent.data.tags["vitscale.spec_hash"]
    assert "vitscale.version.torch" in parent.data.tags
    runs = child_runs(uri, "grid-tiny")
    assert len(runs) == 4
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    for run in runs:
        tags, params = run.data.tags, run.data.params
        assert tags["mlflow.parentRunId"] == parent.info.run_id
        assert params["model.width"] == "16" and params["data.dataset"] == "digits"
        assert tags["vitscale.node_id"]
        # Two 1-CPU trials at once on 2 CPUs: each ran 1 thread, its worker started passive.
        assert params["train.threads"] == "1"
        text = trial_stdout(uri, run, tmp_path / "logs")
        first = next((line for line in text.splitlines() if " trial {" in line), text)  # its own first line
        assert first.endswith("epochs, 1 thread, OMP_WAIT_POLICY=PASSIVE"), first
        if float(params["train.lr"]) > 1:
            assert tags["vitscale.status"] == "FAILED" and run.info.status == "FAILED"
            assert tags["vitscale.failure_reason"].startswith(
                "diverged: loss became non-finite at epoch 1, within steps"
            )
        else:
            assert tags["vitscale.status"] == "FINISHED" and run.info.status == "FINISHED"
            epochs = [m.step for m in client.get_metric_history(run.info.run_id, "val_top1")]
            assert epochs == [1, 2]
            assert {"train_loss", "val_top5"} <= set(run.data.metrics)
            assert not {"params", "flops_per_image", "epoch", "did_not_train"} & set(run.data.metrics)
            assert int(params["params"]) > 0 and float(params["flops_per_image"]) > 0  # constants: params
            shipped = {a.path for a in client.list_artifacts(run.info.run_id, "predictions")}
            assert shipped == {"predictions/val.parquet", "predictions/test.parquet"}  # per-image results
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id)]
    assert "spec.yaml" in artifacts


def test_tpe_study_replicates_seeds_and_keeps_the_optuna_history(tmp_path):
    study = write_study(
        tmp_path,
        "tpe-tiny",
        space={
            "model.mixer": {"choice": ["attention", "ssog"]},
            "model.ssog.num_gaussians": {"int": [1, 4], "when": {"model.mixer": "ssog"}},
            "train.lr": {"loguniform": [1.0e-3, 1.0e-2]},
        },
        search={"algorithm": "tpe", "num_samples": 3, "seeds": [0, 1], "max_concurrent_trials": 2},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    vitscale(*study_run(study, uri, tmp_path / "results", "--quiet", cpus=2), cwd=tmp_path)
    runs = child_runs(uri, "tpe-tiny")
    assert len(runs) == 6
    by_point = Counter(run.data.tags["vitscale.config_key"] for run in runs)
    assert sorted(by_point.values()) == [2, 2, 2]  # three sampled points, each with seeds 0 and 1
    for run in runs:
        params = run.data.params
        if params["model.mixer"] == "attention":  # only the active mixer's settings are logged
            assert (
                not [k for k in params if k.startswith("model.ssog.")] and "model.attention.backend" in params
            )
        else:
            assert (
                not [k for k in params if k.startswith("model.attention.")]
                and "model.ssog.num_gaussians" in params
            )
        # named by the point's variant, its Optuna trial number and the seed: 'ssog · #2 · s1'
        seed = params["train.seed"]
        assert re.fullmatch(rf"{params['model.mixer']} · #[0-2] · s{seed}", run.info.run_name), (
            run.info.run_name
        )
    [db] = list((tmp_path / "results" / "tpe-tiny").glob("*/optuna.db"))
    with sqlite3.connect(db) as con:
        states = [row[0] for row in con.execute("select state from trials")]
    # a point with a replicate ASHA stopped early is told PRUNED (its value was read at a lower
    # budget), the others COMPLETE
    stopped = {
        r.data.tags["vitscale.config_key"] for r in runs if r.data.tags["vitscale.stopped_early"] == "true"
    }
    assert len(states) == 3 and set(states) <= {"COMPLETE", "PRUNED"}
    assert states.count("PRUNED") == len(stopped), (states, stopped)


def test_preflight_refuses_a_gpu_trial_on_a_cpu_cluster(tmp_path):
    study = write_study(tmp_path, "gpu-tiny")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    proc = vitscale(
        *study_run(study, uri, tmp_path / "results", "--set", "resources.gpu=1"), cwd=tmp_path, check=False
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "resources" in errors[0] and "1 GPU" in errors[0]
    assert "Traceback" not in proc.stderr


def test_a_storage_folder_that_cannot_be_made_is_one_line_and_no_mlflow_run(tmp_path):
    """A FileNotFoundError traceback before, after the study's parent run was already in MLflow."""
    study = write_study(tmp_path, "unwritable-storage")
    uri = f"sqlite:///{tmp_path / 'm.db'}"
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    proc = vitscale(*study_run(study, uri, blocked / "results"), cwd=tmp_path, check=False)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert f"storage: cannot create {blocked / 'results' / 'unwritable-storage'}" in errors[0]
    assert "Traceback" not in proc.stderr
    assert MlflowClient(tracking_uri=uri).get_experiment_by_name("unwritable-storage") is None


KILL_EPOCHS = 6  # per trial of the killed study


def test_driver_killed_mid_study_then_resume_finishes_exactly_the_plan(tmp_path):
    study = write_study(
        tmp_path,
        "resume-tiny",
        space={
            "model.mixer": {"grid": ["attention", "ssog"]},
            "model.regime": {"grid": ["discrete", "looped"]},
        },
        search={"algorithm": "grid", "max_concurrent_trials": 1},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    # one trial at a time: three are still to run when the first one's last epoch is in
    command = study_run(study, uri, results, "--quiet", "--set", f"trial.train.epochs={KILL_EPOCHS}")
    driver = start_vitscale(*command, cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.time() + 300
        while time.time() < deadline:  # kill as soon as one trial reported its last epoch to Tune:
            # with reused workers a tiny trial takes about a second, so poll Tune's files, not MLflow
            if any(_epochs(f) >= KILL_EPOCHS for f in results.glob("resume-tiny/*/*/result.json")):
                break
            assert driver.poll() is None, "the study ended before it could be killed"
            time.sleep(0.05)
        else:
            pytest.fail("no trial finished within 300 s")
    finally:
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    assert _finished(uri, "resume-tiny") < 4

    proc = vitscale(
        "study",
        "resume",
        "resume-tiny",
        "--storage",
        str(results),
        "--num-cpus",
        "1",
        "--quiet",
        cwd=tmp_path,
    )
    assert "4 finished" in proc.stdout
    # the snapshot may list checkpoints pruned after it was written: pruning them again is a no-op
    # (tune.resumable_snapshot), never Ray's FileNotFoundError halfway through a trial's checkpoint
    assert "Error handling checkpoint" not in proc.stderr, proc.stderr[-3000:]
    runs = child_runs(uri, "resume-tiny")
    finished = [r for r in runs if r.data.tags["vitscale.status"] == "FINISHED"]
    assert len(finished) == 4
    assert len({r.data.tags["vitscale.trial_id"] for r in finished}) == 4
    configs = Counter(
        json.dumps([r.data.params["model.mixer"], r.data.params["model.regime"]]) for r in finished
    )
    assert set(configs.values()) == {1}  # each planned configuration finished exactly once
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    for run in finished:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert steps == list(range(1, KILL_EPOCHS + 1))  # no lost and no doubled epochs
    others = [r for r in runs if r not in finished]
    assert all(r.data.tags["vitscale.status"] == "KILLED" for r in others)


def _epochs(result_file) -> int:
    try:
        return result_file.read_text().count("\n")
    except OSError:
        return 0


def _finished(uri: str, study: str) -> int:
    try:
        return sum(r.data.tags.get("vitscale.status") == "FINISHED" for r in child_runs(uri, study))
    except Exception:  # the store or experiment may not exist yet
        return 0
