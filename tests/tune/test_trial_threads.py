"""Trials on in-process Ray run with the threads and the OpenMP wait policy vitscale gives them:
two 1-CPU trials at once on 2 CPUs, each logging 1 thread and OMP_WAIT_POLICY=PASSIVE (its worker
started with it: the user's shell had none), and `train.threads` logged as run."""

from __future__ import annotations

import pytest
from study_helpers import child_runs, trial_stdout, vitscale, write_study

pytestmark = pytest.mark.slow


def test_concurrent_trials_run_passive_with_their_cpus_as_threads(tmp_path, monkeypatch):
    for name in ("OMP_WAIT_POLICY", "OMP_NUM_THREADS"):
        monkeypatch.delenv(name, raising=False)  # the CLI's environment is this one's
    study = write_study(
        tmp_path, "threads-tiny", space={"model.mixer": {"grid": ["attention", "ssog"]}},
        search={"algorithm": "grid", "max_concurrent_trials": 2},
    )  # fmt: skip
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "results"),
        "--num-cpus", "2", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    runs = child_runs(uri, "threads-tiny")
    assert len(runs) == 2
    for run in runs:
        assert run.data.params["train.threads"] == "1"
        text = trial_stdout(uri, run, tmp_path / "logs")
        first = next((line for line in text.splitlines() if " trial {" in line), text)  # its own first line
        assert first.endswith("epochs, 1 thread, OMP_WAIT_POLICY=PASSIVE"), first
