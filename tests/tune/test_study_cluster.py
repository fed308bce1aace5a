"""Studies on a real two-node Ray cluster with a real MLflow server, run directly and as a Ray job."""

from __future__ import annotations

import json
import time

import pytest
from study_helpers import REPO, child_runs, trial_stdout, vitscale, write_study

pytestmark = pytest.mark.slow


def test_two_node_study_spreads_trials_and_lands_in_the_mlflow_server(ray_cluster, mlflow_server, tmp_path):
    study = write_study(
        tmp_path,
        "cluster-tiny",
        space={
            "model.mixer": {"grid": ["attention", "ssog"]},
            "model.regime": {"grid": ["discrete", "looped"]},
        },
        search={"algorithm": "grid", "max_concurrent_trials": 2},
    )
    proc = vitscale(
        "study",
        "run",
        str(study),
        "--address",
        ray_cluster.gcs_address,
        "--tracking-uri",
        mlflow_server,
        "--storage",
        str(tmp_path / "results"),
        "--quiet",
        cwd=tmp_path,
    )
    runs = child_runs(mlflow_server, "cluster-tiny")
    statuses = sorted(
        (r.data.tags["vitscale.status"], r.data.tags.get("vitscale.failure_reason", "")) for r in runs
    )
    assert statuses == [("FINISHED", "")] * 4, f"{statuses}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    # the cluster serves a dashboard: its URL, once, as Ray is up (tune.cluster.ready_lines)
    assert [line for line in proc.stdout.splitlines() if "dashboard" in line] == [
        f"Ray dashboard: {ray_cluster.dashboard_url}"
    ], proc.stdout[:3000]
    for run in runs:  # a cluster worker gets the wait policy with the job's runtime_env (tune.cluster)
        text = trial_stdout(mlflow_server, run, tmp_path / "logs")
        first = next((line for line in text.splitlines() if " trial {" in line), text)
        assert first.endswith("epochs, 1 thread, OMP_WAIT_POLICY=PASSIVE"), first
    # One 1-CPU trial per node at a time: trials that overlapped ran on different nodes. (Reused
    # workers may run all four on one node when the second node's worker is slow to start.)
    spans = [(r.info.start_time, r.info.end_time, r.data.tags["vitscale.node_id"]) for r in runs]
    assert all(node for _, _, node in spans)
    for i, (start_a, end_a, node_a) in enumerate(spans):
        for start_b, end_b, node_b in spans[i + 1 :]:
            if start_a < end_b and start_b < end_a:
                assert node_a != node_b, spans


def test_submit_runs_the_study_as_a_ray_job(ray_cluster, mlflow_server, tmp_path):
    shrink = [
        "name=submit-tiny",
        f"storage={tmp_path / 'results'}",
        "space.model.width={grid: [16]}",
        "space.model.regime={grid: [discrete]}",
        "trial.model.depth=1",
        "trial.data.resolution=16",
        "trial.data.num_train=192",
        "trial.data.num_val=96",
        "trial.train.epochs=1",
        "scheduler.type=fifo",
        "search.seeds=[0]",  # quickstart runs three seeds; one is enough here
    ]
    sets = [arg for item in shrink for arg in ("--set", item)]
    proc = vitscale(
        "study",
        "submit",
        "studies/quickstart.yaml",
        "--address",
        ray_cluster.dashboard_url,
        "--tracking-uri",
        mlflow_server,
        *sets,
        cwd=REPO,
    )
    job_id = proc.stdout.strip().splitlines()[-1]
    # Ray's INFO lines about packing and uploading the working_dir stay out of the terminal
    for words in ("Creating a file package", "Pushing file package", "Successfully pushed", "Uploading"):
        assert words not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    deadline, status = time.time() + 600, "PENDING"
    while time.time() < deadline:
        rows = json.loads(
            vitscale(
                "study", "status", job_id, "--address", ray_cluster.dashboard_url, "--json", cwd=tmp_path
            ).stdout
        )
        status = rows[0]["status"]
        if status in ("SUCCEEDED", "FAILED", "STOPPED"):
            break
        time.sleep(3)
    logs = vitscale("study", "logs", job_id, "--address", ray_cluster.dashboard_url, cwd=tmp_path).stdout
    assert status == "SUCCEEDED", logs[-3000:]
    assert "2 trials — 2 finished" in logs.replace("\n", " ")
    runs = child_runs(mlflow_server, "submit-tiny")
    assert len(runs) == 2 and {r.data.tags["vitscale.status"] for r in runs} == {"FINISHED"}


def test_submit_refuses_a_store_the_cluster_cannot_write(tmp_path):
    proc = vitscale(
        "study",
        "submit",
        "studies/quickstart.yaml",
        "--address",
        "http://127.0.0.1:9",
        "--tracking-uri",
        "sqlite:///mlflow.db",
        cwd=REPO,
        check=False,
    )
    assert (
        proc.returncode == 2 and "tracking.uri" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    )
