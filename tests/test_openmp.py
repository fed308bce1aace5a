"""`vitscale` starts OpenMP waiting passively: `vitscale train` as a user runs it (libgomp's own
OMP_DISPLAY_ENV report says what the runtime read), with its threads resolved, printed and logged;
a policy the user exported wins; a process that loaded OpenMP first is left as it is."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from vitscale import openmp

ROOT = Path(__file__).resolve().parents[1]
TINY_TRAIN = [
    "train", "--width", "16", "--depth", "1", "--heads", "2", "--patch-size", "4", "--resolution", "16",
    "--epochs", "1", "--set", "data.num_train=64", "--set", "data.num_val=32", "--device", "cpu",
]  # fmt: skip


def _env(**extra: str) -> dict[str, str]:
    """A shell without OpenMP settings: whatever policy the process gets, vitscale gave it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_", "RAY_", "TUNE_"))}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "platform"), env.get("PYTHONPATH", "")])
    return {**env, **extra}


def _run(args: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        [sys.executable, *args], cwd=cwd, env=_env(**env), capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _runtime_read(stderr: str) -> str:
    """OMP_WAIT_POLICY as libgomp reports it at start-up (OMP_DISPLAY_ENV=TRUE)."""
    found = re.findall(r"OMP_WAIT_POLICY = '(\w+)'", stderr)
    assert found, stderr[-3000:]
    return found[0]


def test_worker_env_is_passive_unless_the_user_chose_and_carries_the_threads():
    assert openmp.worker_env(environ={}) == {"OMP_WAIT_POLICY": "PASSIVE"}
    assert openmp.worker_env(2, environ={"OMP_WAIT_POLICY": "active"}) == {
        "OMP_WAIT_POLICY": "active",
        "OMP_NUM_THREADS": "2",
    }


def test_vitscale_train_starts_openmp_passive_and_logs_the_threads_it_ran(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    proc = _run(["-m", "vitscale", *TINY_TRAIN, "--tracking-uri", uri], tmp_path, OMP_DISPLAY_ENV="TRUE")
    assert _runtime_read(proc.stderr) == "PASSIVE"
    line = re.search(r"^train on cpu: (\d+) threads?, OMP_WAIT_POLICY=PASSIVE$", proc.stdout, re.MULTILINE)
    assert line, proc.stdout[-3000:]
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (run,) = client.search_runs([client.get_experiment_by_name("vitscale-train").experiment_id])
    assert run.data.params["train.threads"] == line.group(1)  # torch's count, resolved before it was logged


def test_a_policy_the_user_exported_wins_and_set_threads_are_kept(tmp_path):
    proc = _run(
        ["-m", "vitscale", *TINY_TRAIN, "--no-track", "--set", "train.threads=1"],
        tmp_path,
        OMP_DISPLAY_ENV="TRUE",
        OMP_WAIT_POLICY="ACTIVE",
    )
    assert _runtime_read(proc.stderr) == "ACTIVE"
    assert "train on cpu: 1 thread, OMP_WAIT_POLICY=ACTIVE" in proc.stdout.splitlines(), proc.stdout[-3000:]


def test_a_process_that_loaded_openmp_first_is_left_as_it_started(tmp_path):
    probe = (
        "import os, sys; from vitscale import openmp; {first}"
        "print(openmp.wait_passively_here(), os.environ.get('OMP_WAIT_POLICY'))"
    )
    fresh = _run(["-c", probe.format(first="")], tmp_path)
    assert fresh.stdout.split() == ["True", "PASSIVE"]
    loaded = _run(["-c", probe.format(first="import torch; ")], tmp_path)
    assert loaded.stdout.split() == ["False", "None"]
