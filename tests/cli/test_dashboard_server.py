"""`vitscale dashboard` runs optuna-dashboard as a child: its URL is printed once the server
answers, and Ctrl-C stops it without a traceback."""

from __future__ import annotations

import optuna
import pytest
from cli_servers import free_port, serve_then_interrupt

from vitscale.cli.local_server import answers_http
from vitscale.tune.optuna_study import DB_FILE
from vitscale.tune.storage import STATE_FILE


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_dashboard_prints_its_url_once_the_server_answers(tmp_path):
    execution = tmp_path / "ray_results" / "demo" / "20261201-000000"
    execution.mkdir(parents=True)
    (execution / STATE_FILE).write_text("{}")
    study = optuna.create_study(study_name="demo", storage=f"sqlite:///{execution / DB_FILE}")
    study.optimize(lambda trial: trial.suggest_float("x", 0, 1), n_trials=2)
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
