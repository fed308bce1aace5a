"""mlflow-up.sh restarts on the port mlflow-down.sh just released: the connections the stopped
server closed sit in TIME_WAIT for up to a minute, which a plain bind() counted as "in use"."""

from __future__ import annotations

import http.client
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
pytest_plugins = ["fixtures_cluster"]

pytestmark = pytest.mark.slow


def _time_wait_on(port: int) -> bool:
    out = subprocess.run(["ss", "-Htan", "state", "time-wait"], capture_output=True, text=True).stdout
    return any(line.split()[2].endswith(f":{port}") for line in out.splitlines() if len(line.split()) > 2)


def test_mlflow_up_right_after_mlflow_down_on_the_same_port(tmp_path):
    from fixtures_cluster import free_port, start_mlflow_server, stop_mlflow_server

    port = free_port()
    try:
        start_mlflow_server(tmp_path, port=port)
        # A client holding a keep-alive connection: the server closes it first when it stops.
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/health")
        assert conn.getresponse().read() == b"OK"
        stop_mlflow_server(port, str(tmp_path))
        conn.close()
        assert _time_wait_on(port)  # the condition that used to refuse the restart
        server = start_mlflow_server(tmp_path, port=port)
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/health")
        assert server.port == port and conn.getresponse().read() == b"OK"
        conn.close()
    finally:
        stop_mlflow_server(port, str(tmp_path))
