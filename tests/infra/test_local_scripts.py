"""infra/local with real services: an MLflow server and a two-node Ray cluster on this machine,
through the same session fixtures (tests/fixtures_cluster.py) the integration tests use."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import urllib.request
from pathlib import Path

import pytest

# tests/ holds fixtures_cluster; tests/conftest.py loads it the same way and pytest loads it once.
# Its helpers are imported inside the tests, after pytest has loaded it as a plugin.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytest_plugins = ["fixtures_cluster"]

pytestmark = pytest.mark.slow


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.status, r.read().decode()


def session_processes(pid_file: Path) -> list[str]:
    """Processes still alive in the session whose id the pid file holds (zombies excluded)."""
    sid = pid_file.read_text().strip()
    out = subprocess.run(["ps", "-eo", "sid=,stat=,pid="], capture_output=True, text=True, check=True).stdout
    return [
        line for line in out.splitlines() if line.split()[0] == sid and not line.split()[1].startswith("Z")
    ]


def test_mlflow_scripts_lifecycle(tmp_path):
    """mlflow-up.sh: health, a run with params/metrics/artifact; up again is a no-op; mlflow-down.sh
    stops every process of the server and is idempotent."""
    from mlflow import MlflowClient

    from fixtures_cluster import LOCAL, free_port, script_env, start_mlflow_server, stop_mlflow_server

    port = free_port()
    try:
        server = start_mlflow_server(tmp_path, port=port)
        assert server.uri == f"http://127.0.0.1:{port}"
        assert get(f"{server.uri}/health") == (200, "OK")
        pid_file = tmp_path / f"mlflow-{port}.pid"
        assert session_processes(pid_file)

        client = MlflowClient(tracking_uri=server.uri)
        experiment = client.create_experiment("infra-smoke")
        run = client.create_run(experiment)
        client.log_param(run.info.run_id, "mixer", "ssog")
        client.log_metric(run.info.run_id, "val_top1", 0.5, step=1)
        (tmp_path / "note.txt").write_text("hello")
        client.log_artifact(run.info.run_id, str(tmp_path / "note.txt"))
        client.set_terminated(run.info.run_id)

        again = MlflowClient(tracking_uri=server.uri).get_run(run.info.run_id)
        assert again.data.params == {"mixer": "ssog"}
        assert again.data.metrics == {"val_top1": 0.5}
        # Artifacts go through the server (--serve-artifacts) into its --artifacts folder.
        assert [f.path for f in client.list_artifacts(run.info.run_id)] == ["note.txt"]
        assert list((tmp_path / "artifacts").rglob("note.txt"))

        # Starting again on the same port reports the running server instead of failing.
        up = subprocess.run(
            [str(LOCAL / "mlflow-up.sh"), "--port", str(port), "--state-dir", str(tmp_path)],
            capture_output=True, text=True, env=script_env(), timeout=60,
        )  # fmt: skip
        assert up.returncode == 0 and up.stdout.strip() == f"MLFLOW_TRACKING_URI={server.uri}"
        assert "already running" in up.stderr
        processes = session_processes(pid_file)
    finally:
        stop_mlflow_server(port, str(tmp_path))
    sids = {line.split()[0] for line in processes}
    out = subprocess.run(["ps", "-eo", "sid=,stat="], capture_output=True, text=True, check=True).stdout
    assert not [
        line for line in out.splitlines() if line.split()[0] in sids and not line.split()[1].startswith("Z")
    ]
    assert not pid_file.exists()
    with pytest.raises(OSError):
        get(f"http://127.0.0.1:{port}/health")
    stop_mlflow_server(port, str(tmp_path))  # again: a no-op


def test_mlflow_server_fixture(mlflow_server):
    assert mlflow_server.startswith("http://127.0.0.1:")
    assert get(f"{mlflow_server}/health") == (200, "OK")


def test_ray_cluster_fixture_has_two_alive_nodes(ray_cluster):
    """Head + 1 worker, each its own raylet; a driver joins through 127.0.0.1:PORT; tasks can be
    placed on either node; the job server answers."""
    assert ray_cluster.gcs_address.startswith("127.0.0.1:")
    assert ray_cluster.dashboard_url.startswith("http://127.0.0.1:")
    assert ray_cluster.num_nodes == 2
    assert len(ray_cluster.temp_dir) <= 40

    driver = textwrap.dedent(
        f"""
        import json, ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
        ray.init(address={ray_cluster.gcs_address!r}, logging_level="ERROR", log_to_driver=False)
        alive = [n for n in ray.nodes() if n["Alive"]]

        @ray.remote(num_cpus=1)
        def where():
            return ray.get_runtime_context().get_node_id()

        ran_on = ray.get([
            where.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)).remote()
            for n in alive
        ])
        print(json.dumps({{
            "alive": sorted(n["NodeID"] for n in alive),
            "cpus": [n["Resources"].get("CPU") for n in alive],
            "ran_on": sorted(ran_on),
        }}))
        """
    )
    # A plain Ray client of this loopback-only cluster needs Ray's single-machine switch, or Ray
    # swaps 127.0.0.1 for the host's IP and finds nothing there (ray-up.sh prints it; vitscale sets it).
    env = {**os.environ, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    proc = subprocess.run(
        [sys.executable, "-c", driver], capture_output=True, text=True, timeout=180, cwd="/tmp", env=env
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert len(result["alive"]) == 2
    assert result["cpus"] == [1.0, 1.0]
    assert result["ran_on"] == result["alive"]

    status, body = get(f"{ray_cluster.dashboard_url}/api/jobs/")
    assert status == 200 and isinstance(json.loads(body), list)


def test_ray_down_of_another_temp_dir_leaves_the_cluster_alone(ray_cluster):
    """ray-down.sh is scoped to its --temp-dir: stopping "another" cluster touches nothing here."""
    from fixtures_cluster import LOCAL, script_env, short_temp_dir

    other = short_temp_dir()
    proc = subprocess.run(
        [str(LOCAL / "ray-down.sh"), "--temp-dir", other, "--clean"],
        capture_output=True, text=True, env=script_env(), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0 and "nothing to stop" in proc.stderr
    status, body = get(f"{ray_cluster.dashboard_url}/api/v0/nodes?limit=10")
    nodes = json.loads(body)["data"]["result"]["result"]
    assert status == 200 and [n["state"] for n in nodes] == ["ALIVE", "ALIVE"]
