"""Session fixtures with real services, started and stopped by the infra/local scripts.

- `ray_cluster`: a Ray head plus one worker node (separate raylets) on this machine, each with one
  logical CPU; a `LocalRayCluster` with `gcs_address` ("127.0.0.1:PORT", for ray.init / --address),
  `dashboard_url` ("http://127.0.0.1:PORT", the job server, for `study submit --address`),
  `num_nodes` and `temp_dir`.
- `mlflow_server`: an `mlflow server` process on 127.0.0.1 with a SQLite store in a temporary
  folder; its tracking URI "http://127.0.0.1:PORT" (a str).

Load them once for the whole suite from tests/conftest.py with `pytest_plugins = ["fixtures_cluster"]`.
Ports are free ones picked at start; the Ray cluster gets its own short --temp-dir (/tmp/vsr-*),
and its teardown stops only that cluster's processes, never other Ray instances on the machine.
`start_ray_cluster` / `start_mlflow_server` serve tests that need a cluster of another shape.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LOCAL = REPO / "infra" / "local"


@dataclass(frozen=True)
class LocalRayCluster:
    gcs_address: str  # "127.0.0.1:PORT": ray.init(address=...), `vitscale study run --address`
    dashboard_url: str  # "http://127.0.0.1:PORT": job server, `vitscale study submit --address`
    num_nodes: int
    temp_dir: str  # pass to infra/local/ray-down.sh --temp-dir


@dataclass(frozen=True)
class LocalMlflowServer:
    uri: str  # "http://127.0.0.1:PORT"
    port: int
    state_dir: str  # pid and log files (mlflow-PORT.pid / .log)


def free_port() -> int:
    """A TCP port nothing listens on at the moment (the kernel's pick on 127.0.0.1)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def script_env() -> dict[str, str]:
    """The environment for the scripts: they then use this interpreter's venv (ray, mlflow)."""
    env = dict(os.environ)
    if sys.prefix != sys.base_prefix:
        env["VIRTUAL_ENV"] = sys.prefix
    return env


def _run(args: list[str], timeout: float) -> dict[str, str]:
    """Run an infra/local script; return its KEY=VALUE stdout lines; raise with its stderr on failure."""
    proc = subprocess.run(
        args, capture_output=True, text=True, timeout=timeout, env=script_env(), stdin=subprocess.DEVNULL
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{Path(args[0]).name} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    return dict(line.split("=", 1) for line in proc.stdout.splitlines() if "=" in line)


def start_ray_cluster(
    temp_dir: str, workers: int = 1, cpus_per_node: int = 1, object_store_mb: int = 256, timeout: int = 300
) -> LocalRayCluster:
    """infra/local/ray-up.sh on free ports; temp_dir must be short (/tmp/vsr-XXXX): socket paths."""
    out = _run(
        [
            str(LOCAL / "ray-up.sh"),
            "--workers", str(workers),
            "--cpus-per-node", str(cpus_per_node),
            "--port", str(free_port()),
            "--dashboard-port", str(free_port()),
            "--temp-dir", temp_dir,
            "--object-store-mb", str(object_store_mb),
            "--timeout", str(timeout),
        ],
        timeout=timeout * (workers + 2) + 60,
    )  # fmt: skip
    return LocalRayCluster(
        gcs_address=out["RAY_ADDRESS"],
        dashboard_url=out["RAY_DASHBOARD_URL"],
        num_nodes=int(out["RAY_NODES"]),
        temp_dir=out["RAY_TEMP_DIR"],
    )


def stop_ray_cluster(temp_dir: str) -> None:
    """infra/local/ray-down.sh: stops that cluster's processes only, then deletes temp_dir."""
    _run([str(LOCAL / "ray-down.sh"), "--temp-dir", temp_dir, "--grace", "3", "--clean"], timeout=120)


def short_temp_dir() -> str:
    """A new /tmp/vsr-XXXXXXXX folder: Ray's Unix socket paths under it must stay below 107 chars."""
    return tempfile.mkdtemp(prefix="vsr-", dir="/tmp")


def start_mlflow_server(root: Path, port: int | None = None, timeout: int = 240) -> LocalMlflowServer:
    """infra/local/mlflow-up.sh with a SQLite store, artifacts, pid and log files under root."""
    port = port or free_port()
    out = _run(
        [
            str(LOCAL / "mlflow-up.sh"),
            "--port", str(port),
            "--backend-store-uri", f"sqlite:///{root / 'mlflow.db'}",
            "--artifacts", str(root / "artifacts"),
            "--state-dir", str(root),
            "--timeout", str(timeout),
        ],
        timeout=timeout + 60,
    )  # fmt: skip
    return LocalMlflowServer(uri=out["MLFLOW_TRACKING_URI"], port=port, state_dir=str(root))


def stop_mlflow_server(port: int, state_dir: str) -> None:
    _run(
        [str(LOCAL / "mlflow-down.sh"), "--port", str(port), "--state-dir", state_dir, "--grace", "3"],
        timeout=60,
    )


@pytest.fixture(scope="session")
def ray_cluster(request) -> LocalRayCluster:
    """A real two-node Ray cluster on this machine (head + 1 worker, 1 CPU each), for the session."""
    temp_dir = short_temp_dir()
    # Registered before starting: a start that fails or is interrupted half-way is cleaned up too.
    request.addfinalizer(lambda: _stop_and_remove(temp_dir))
    return start_ray_cluster(temp_dir, workers=1, cpus_per_node=1)


def _stop_and_remove(temp_dir: str) -> None:
    try:
        stop_ray_cluster(temp_dir)
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def mlflow_server(request, tmp_path_factory) -> str:
    """A real `mlflow server` on 127.0.0.1 (SQLite store in a temp folder); its tracking URI."""
    root = tmp_path_factory.mktemp("mlflow-server")
    port = free_port()
    request.addfinalizer(lambda: stop_mlflow_server(port, str(root)))
    return start_mlflow_server(root, port=port).uri
