"""A worker node lost mid-study (every process of its raylet killed): its trial restarts from its
last checkpoint on the surviving node, the study completes with exactly its planned trials, one
child run per trial with every epoch once, and the restarted trial is tagged with its restart count."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
import urllib.request
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "tune")]
pytest_plugins = ["fixtures_cluster"]

from study_helpers import child_runs, start_vitscale, write_study  # noqa: E402

pytestmark = pytest.mark.slow

EPOCHS = 20


def _head_node_id(dashboard_url: str) -> str:
    with urllib.request.urlopen(f"{dashboard_url}/api/v0/nodes?limit=10", timeout=30) as r:
        nodes = json.load(r)["data"]["result"]["result"]
    return next(n["node_id"] for n in nodes if n.get("is_head_node"))


def _kill_node(node_dir: str) -> int:
    """SIGKILL every process whose command line names node_dir (one node's raylet, agents, workers
    point there) and their descendants; read from /proc: `ps` may cut long command lines."""
    parents, doomed = {}, set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            parents[int(proc.name)] = int((proc / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except OSError:
            continue
        if f"{node_dir}/" in cmdline:
            doomed.add(int(proc.name))
    grew = True
    while grew:
        more = {pid for pid, parent in parents.items() if parent in doomed} - doomed
        doomed |= more
        grew = bool(more)
    for pid in doomed:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return len(doomed)


def test_a_lost_worker_node_restarts_its_trial_on_the_survivor(tmp_path):
    from mlflow import MlflowClient

    from fixtures_cluster import short_temp_dir, start_ray_cluster, stop_ray_cluster

    temp_dir, driver = short_temp_dir(), None
    try:
        cluster = start_ray_cluster(temp_dir, workers=1, cpus_per_node=1)
        head = _head_node_id(cluster.dashboard_url)
        study = write_study(
            tmp_path,
            "node-loss",
            space={"model.mixer": {"grid": ["attention", "ssog"]}},
            search={"algorithm": "grid", "max_concurrent_trials": 2},
            failure={"max_failures": 2},
        )
        uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
        args = ["study", "run", str(study), "--address", cluster.gcs_address, "--tracking-uri", uri]
        args += ["--storage", str(tmp_path / "results"), "--quiet", "--set", f"trial.train.epochs={EPOCHS}"]
        args += ["--set", "trial.data.num_train=1200"]
        log = (tmp_path / "driver.log").open("w")
        driver = start_vitscale(*args, cwd=tmp_path, log=log)
        deadline, killed, reader = time.time() + 600, 0, None
        while not killed:
            assert driver.poll() is None and time.time() < deadline, (tmp_path / "driver.log").read_text()[
                -3000:
            ]
            time.sleep(0.5)
            try:
                reader = reader or MlflowClient(tracking_uri=uri)
                experiment = reader.get_experiment_by_name("node-loss")
                runs = reader.search_runs([experiment.experiment_id], "tags.`vitscale.role` = 'trial'")
            except Exception:
                continue
            on_worker = [r for r in runs if r.data.tags.get("vitscale.node_id") not in (None, head)]
            # `epoch` is the step of every metric, not a metric of its own (tracking.layout)
            epochs = len(reader.get_metric_history(on_worker[0].info.run_id, "val_loss")) if on_worker else 0
            if epochs >= 2:
                lost = on_worker[0].data.tags["vitscale.trial_id"]
                killed = _kill_node(f"{cluster.temp_dir}/w1")
        rc = driver.wait(timeout=900)
    finally:
        if driver is not None and driver.poll() is None:
            driver.kill()
        stop_ray_cluster(temp_dir)
    output = (tmp_path / "driver.log").read_text()
    assert rc == 0, output[-4000:]
    runs = child_runs(uri, "node-loss")
    assert sorted(r.data.tags["vitscale.trial_id"] for r in runs) == sorted(
        {r.data.tags["vitscale.trial_id"] for r in runs}
    )
    assert len(runs) == 2, output[-3000:]
    client = MlflowClient(tracking_uri=uri)
    for run in runs:
        tags = run.data.tags
        assert tags["vitscale.status"] == "FINISHED", (tags, output[-3000:])
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        assert steps == list(range(1, EPOCHS + 1)), steps  # every epoch once, restart or not
        if tags["vitscale.trial_id"] == lost:
            assert tags["vitscale.restarts"] == "1" and tags["vitscale.node_id"] == head
        else:
            assert "vitscale.restarts" not in tags
