"""`vitscale dashboard` runs optuna-dashboard as a child: its URL is printed once the server
answers, and Ctrl-C or a `kill` (SIGTERM) stops it without a traceback."""

from __future__ import annotations

import signal

import optuna
import pytest
from cli_servers import free_port, port_closed, serve_then_interrupt, serve_then_signal

from vitscale.cli.local_server import answers_http
from vitscale.tune.optuna_study import DB_FILE
from vitscale.tune.storage import STATE_FILE


def _execution(tmp_path):
    execution = tmp_path / "ray_results" / "demo" / "20261201-000000"
    execution.mkdir(parents=True)
    (execution / STATE_FILE).write_text("{}")
    study = optuna.create_study(study_name="demo", storage=f"sqlite:///{execution / DB_FILE}")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
    return execution


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dashboard_prints_its_url_once_the_server_answers(tmp_path):
    execution = _execution(tmp_path)
    port = free_port()
    ready, err = serve_then_interrupt(
        ["dashboard", str(execution), "--port", str(port)],
        tmp_path,
        "optuna-dashboard on",
        f"http://127.0.0.1:{port}/",
    )
    assert f"http://127.0.0.1:{port}" in ready
    assert "Traceback" not in err, err[-3000:]
    assert not answers_http(f"http://127.0.0.1:{port}/")  # the server went with it


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dashboard_killed_with_sigterm_stops_its_server(tmp_path):
    execution = _execution(tmp_path)
    port = free_port()
    after = serve_then_signal(
        ["dashboard", str(execution), "--port", str(port)],
        tmp_path,
        "optuna-dashboard on",
        f"http://127.0.0.1:{port}/",
        signal.SIGTERM,
    )
    assert after.returncode == 128 + signal.SIGTERM, after.stderr[-3000:]
    assert after.descendants and after.left == []
    assert port_closed(port)
    assert "Traceback" not in after.stderr, after.stderr[-3000:]
