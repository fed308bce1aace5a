"""`vitscale dashboard` runs optuna-dashboard as a child: its URL is printed once the server
answers, and Ctrl-C stops it without a traceback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import optuna
import pytest

from vitscale.cli.local_server import answers_http
from vitscale.tune.optuna_study import DB_FILE
from vitscale.tune.storage import STATE_FILE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dashboard_prints_its_url_once_the_server_answers(tmp_path):
    execution = tmp_path / "ray_results" / "demo" / "20261201-000000"
    execution.mkdir(parents=True)
    (execution / STATE_FILE).write_text("{}")
    study = optuna.create_study(study_name="demo", storage=f"sqlite:///{execution / DB_FILE}")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "vitscale", "dashboard", str(execution), "--port", str(port)],
        cwd=tmp_path,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C below reaches its whole group, as in a terminal
    )
    try:
        for line in proc.stdout:
            if line.startswith("optuna-dashboard on"):
                assert answers_http(f"http://127.0.0.1:{port}/"), line  # printed after it answers
                assert f"http://127.0.0.1:{port}" in line
                break
        else:
            pytest.fail(f"no URL line; stderr: {proc.stderr.read()[-2000:]}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    assert "Traceback" not in err, err[-3000:]
    assert not answers_http(f"http://127.0.0.1:{port}/")  # the server went with it
