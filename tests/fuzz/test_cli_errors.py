"""Examples the fuzzers found at the CLI's door, kept as plain regression tests."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from unittest import mock

import pytest
from fuzz_support import assert_user_contract, run_cli

from vitscale.errors import SolverError

ROOT = Path(__file__).resolve().parents[2]


def test_control_character_in_an_override_stays_on_one_line():
    result = run_cli("study", "validate", str(ROOT / "studies/quickstart.yaml"), "--set", "objectives.5=\r")
    assert assert_user_contract(result) == ["--set objectives.5=\\r: objectives is not a mapping"]


def test_out_of_memory_is_one_line_exit_2():
    boom = RuntimeError("DefaultCPUAllocator: can't allocate memory: you tried to allocate 1e11 bytes")
    with mock.patch("vitscale.models.measure.describe_model", side_effect=boom):
        lines = assert_user_contract(run_cli("model", "info", "--width", "65536"))
    assert len(lines) == 1 and lines[0].startswith("out of memory: DefaultCPUAllocator")


def test_trial_failure_outside_a_study_is_one_line_exit_2():
    with mock.patch("vitscale.models.measure.describe_model", side_effect=SolverError("underflow in dt")):
        lines = assert_user_contract(run_cli("model", "info", "--regime", "ode"))
    assert lines == ["solver_error: underflow in dt"]


def test_other_runtime_errors_keep_their_traceback():
    with mock.patch("vitscale.models.measure.describe_model", side_effect=RuntimeError("a bug")):
        try:
            run_cli("model", "info")
        except RuntimeError as exc:
            assert str(exc) == "a bug"
        else:
            raise AssertionError("a bug must not be turned into a user error")


@pytest.mark.parametrize("uri", ["file:/tmp/mlruns", "file:///tmp/mlruns", "./mlruns", "mlruns"])
def test_a_file_store_tracking_uri_is_one_line_before_any_run(uri, monkeypatch, tmp_path):
    """MLflow 3.17 raised its own traceback on a file store; no trial may start before that line."""
    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    with mock.patch("vitscale.train.resume.fit", side_effect=AssertionError("trained")):
        lines = assert_user_contract(run_cli("train", "--epochs", "1", "--tracking-uri", uri))
    assert len(lines) == 1 and f"tracking URI {uri!r}" in lines[0] and "sqlite:///" in lines[0], lines
    assert not (tmp_path / "mlruns").exists()


def test_a_superscript_digit_in_a_set_path_is_a_key_not_a_crash():
    """'²'.isdigit() is True but int('²') raises: `--set ²=-1` was a ValueError traceback."""
    result = run_cli("study", "validate", str(ROOT / "studies/quickstart.yaml"), "--set", "²=-1")
    (line,) = assert_user_contract(result)
    assert line.split("quickstart.yaml: ", 1)[1].startswith("²: unknown key; known keys: name, "), line


def test_a_folder_that_cannot_be_made_is_one_line_naming_its_flag(tmp_path):
    """--checkpoint-dir under a file (or in /proc) was a FileNotFoundError traceback."""
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with mock.patch("vitscale.train.resume.fit", side_effect=AssertionError("trained")):
        lines = assert_user_contract(
            run_cli("train", "--epochs", "1", "--no-track", "--checkpoint-dir", str(blocked / "ckpt"))
        )
    assert lines == [
        f"--checkpoint-dir: cannot create {blocked / 'ckpt'} (Not a directory); pass a writable folder"
    ]


def test_an_address_where_nothing_listens_is_one_line_in_seconds_not_minutes(monkeypatch, tmp_path):
    """`ray.init(address=...)` retried an address with no Ray behind it for minutes (a hang)."""
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens there
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.chdir(tmp_path)
    start = time.monotonic()
    result = run_cli("study", "run", str(ROOT / "studies/quickstart.yaml"), "--address", f"127.0.0.1:{port}")
    (line,) = assert_user_contract(result)
    assert line.startswith(f"--address: cannot connect to the Ray cluster at '127.0.0.1:{port}' (")
    assert time.monotonic() - start < 30 and not list(tmp_path.glob("ray_results/*/*"))


@pytest.mark.parametrize(
    ("record", "why"),
    [
        ("{trunc", "cannot read this execution's record"),
        ('{"x": 1}', "no 'spec'"),
        ("[1]", "not an execution"),
    ],
)
def test_a_damaged_execution_record_is_one_line_for_resume_and_dashboard(tmp_path, record, why):
    """A truncated or edited vitscale-study.json was a JSONDecodeError traceback."""
    folder = tmp_path / "q" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / "vitscale-study.json").write_text(record)
    (tmp_path / "q" / "latest").write_text(folder.name + "\n")
    (line,) = assert_user_contract(run_cli("study", "resume", "q", "--storage", str(tmp_path)))
    assert line.startswith(f"{folder / 'vitscale-study.json'}: ") and why in line, line
    (line,) = assert_user_contract(run_cli("dashboard", "q", "--storage", str(tmp_path)))  # reads one key
    assert why in line or "has no Optuna study" in line, line
