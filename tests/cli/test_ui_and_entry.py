"""`vitscale ui` prints its URL once the server answers and without MLflow's deprecation
warnings, and every stop signal ends it with its server; `vitscale --version`; a study file's
name (`tuned_quickstart`) reads as its study."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_servers import free_port, port_closed, serve_then_interrupt, serve_then_signal

from vitscale.cli.analyze_cmd import resolve_study
from vitscale.cli.ui_cmd import SERVER_WARNING_FILTERS, server_env

REPO = Path(__file__).resolve().parents[2]


def test_the_server_env_keeps_the_users_warning_filters_and_job_setting(monkeypatch):
    monkeypatch.setenv("PYTHONWARNINGS", "error::UserWarning")
    monkeypatch.setenv("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "true")
    env = server_env()
    assert env["PYTHONWARNINGS"].split(",") == ["error::UserWarning", *SERVER_WARNING_FILTERS]
    assert env["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] == "true"  # the user's choice wins


@pytest.mark.slow
@pytest.mark.timeout(400)
def test_ui_prints_its_url_only_once_the_server_answers_and_no_deprecation_warning(tmp_path):
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri).search_experiments()  # the store exists
    port = free_port()
    _, err = serve_then_interrupt(
        ["ui", "--tracking-uri", uri, "--port", str(port)],
        tmp_path,
        "MLflow UI on",
        f"http://127.0.0.1:{port}/health",
    )
    assert "Warning" not in err, err[-3000:]
    assert "Traceback" not in err, err[-3000:]


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_ui_stopped_by_a_signal_stops_its_server_and_every_child(tmp_path, number):
    """`kill` (SIGTERM) or a closed terminal (SIGHUP) reach the CLI alone: the MLflow server runs
    in a session of its own, so the CLI must stop it, workers included, before it exits."""
    from mlflow import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    MlflowClient(tracking_uri=uri).search_experiments()  # the store exists
    port = free_port()
    after = serve_then_signal(
        ["ui", "--tracking-uri", uri, "--port", str(port)],
        tmp_path,
        "MLflow UI on",
        f"http://127.0.0.1:{port}/health",
        number,
    )
    assert after.returncode == 128 + number, after.stderr[-3000:]
    assert after.descendants  # the server ran as its child
    assert after.left == []
    assert port_closed(port)
    assert "Traceback" not in after.stderr, after.stderr[-3000:]


def test_version_prints_the_package_version():
    from vitscale import __version__

    proc = subprocess.run(
        [sys.executable, "-m", "vitscale", "--version"], capture_output=True, text=True, timeout=300
    )
    assert (proc.returncode, proc.stdout.strip()) == (0, f"vitscale {__version__}")


def test_a_study_files_name_or_path_resolves_to_the_study_it_names(monkeypatch):
    monkeypatch.chdir(REPO)
    assert resolve_study("tuned_quickstart")[0] == "tuned-quickstart"  # studies/tuned_quickstart.yaml
    assert resolve_study("studies/tuned_quickstart.yaml")[0] == "tuned-quickstart"
    assert resolve_study("tuned-quickstart")[0] == "tuned-quickstart"  # a study name as it is
    assert resolve_study("no_such_file")[0] == "no_such_file"


ENTRY_PROBE = """
import gc, sys, types
calls = []
sys.modules["ray"] = types.SimpleNamespace(is_initialized=lambda: True, shutdown=lambda: calls.append("shutdown"))
from vitscale.cli import entry
sys.argv = ["vitscale", "--version"]
try:
    entry()
finally:
    print(calls, gc.get_freeze_count() > 0)
"""


def test_the_console_entry_shuts_ray_down_and_freezes_the_collector_before_exiting():
    """`entry` (the console script, `python -m vitscale`) shuts down the Ray the command used and
    freezes the collector, so the interpreter's teardown skips its last walks (the fake `ray` stands
    for an initialised one); in-process `main` is left alone (the tests call it)."""
    proc = subprocess.run([sys.executable, "-c", ENTRY_PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().splitlines()[-1] == "['shutdown'] True"
