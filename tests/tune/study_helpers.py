"""Helpers for study tests: a tiny study file, the CLI in a subprocess, and MLflow read-back."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]

# digits at 16x16 through a one-block ViT of width 16: a trial trains in about a second.
TINY_TRIAL = {
    "model": {"width": 16, "depth": 1, "heads": 2, "patch_size": 4, "ode": {"solver": "euler"}},
    "data": {"dataset": "digits", "resolution": 16, "num_train": 192, "num_val": 96},
    "train": {"epochs": 2, "batch_size": 64, "lr": 3.0e-3, "warmup_epochs": 0.5, "device": "cpu"},
}


def write_study(folder: Path, name: str, **sections) -> Path:
    """A study YAML in `folder` with the tiny trial and the given top-level sections."""
    study = {"name": name, "trial": TINY_TRIAL, "resources": {"cpu": 1, "gpu": 0}, **sections}
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def cli_env() -> dict[str, str]:
    """A user's shell: without the RAY_*/TUNE_* variables an in-process ray.init left in this
    process (it sets RAY_AUTH_MODE=token, which a token-less local cluster then refuses). RAY_TMPDIR
    stays: tests/conftest.py looks there for a Ray started by a test not marked slow."""
    env = {k: v for k, v in os.environ.items() if k == "RAY_TMPDIR" or not k.startswith(("RAY_", "TUNE_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("RAY_DEDUP_LOGS", "1")
    env["PYTHONUNBUFFERED"] = "1"
    env["PYTHONFAULTHANDLER"] = "1"  # a hung CLI's threads, on the SIGABRT `vitscale` sends it
    return env


def vitscale(
    *args: str, cwd: Path, timeout: float = 420, check: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run the real CLI (`python -m vitscale`) in a subprocess, as a user would (`env`: variables
    of their shell beside cli_env's).

    One still running after `timeout` gets SIGABRT, so that Python's fault handler
    (PYTHONFAULTHANDLER, see cli_env) prints where every thread of it was, and the test fails with
    that and its output; pytest-timeout (600 s) would show neither."""
    command = [sys.executable, "-m", "vitscale", *args]
    with subprocess.Popen(
        command,
        cwd=cwd,
        env={**cli_env(), **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        try:
            stdout, stderr = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGABRT)
            stdout, stderr = process.communicate()
            raise AssertionError(
                f"vitscale {' '.join(args)} still running after {timeout:.0f} s; its threads then:\n"
                f"{stdout[-4000:]}\n{stderr[-12000:]}"
            ) from None
    proc = subprocess.CompletedProcess(command, process.returncode, stdout, stderr)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"vitscale {' '.join(args)} -> {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def start_vitscale(*args: str, cwd: Path, log=subprocess.DEVNULL, **popen) -> subprocess.Popen:
    """The real CLI started in the background (a driver a test will kill or Ctrl-C); output to
    `log`. SIGINT at its default, as from a terminal: an xdist worker ignores it, and children
    inherit an ignored signal."""
    return subprocess.Popen(
        [sys.executable, "-m", "vitscale", *args],
        cwd=cwd,
        env=cli_env(),
        stdout=log,
        stderr=log,
        preexec_fn=_default_sigint,
        **popen,
    )


def wait_or_kill(driver: subprocess.Popen, timeout: float = 300) -> int:
    """The driver's exit code; a driver still running after `timeout` is killed and the test fails."""
    try:
        return driver.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        driver.kill()
        raise


class Terminal:
    """The CLI in a subprocess, stdout and stderr as one terminal, each line with when it came
    (`lines`: seconds since the start, line). Its own session, so that `os.killpg(process.pid,
    SIGINT)` reaches its whole group, as Ctrl-C in a terminal does."""

    def __init__(self, *args: str, cwd: Path) -> None:
        self.started = time.monotonic()
        self.lines: list[tuple[float, str]] = []
        self.process = subprocess.Popen(
            [sys.executable, "-m", "vitscale", *args],
            cwd=cwd,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append((time.monotonic() - self.started, line.rstrip("\n")))

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc) -> None:
        """A CLI still running when the test ends (it failed) goes, with in-process Ray's
        processes: they share its process group."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def wait(self, timeout: float = 600) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=30)
        return code

    @property
    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def child_runs(tracking_uri: str, study: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(study)
    assert experiment is not None, f"no MLflow experiment {study}"
    return client.search_runs(
        [experiment.experiment_id], filter_string="tags.`vitscale.role` = 'trial'", max_results=1000
    )


def trial_stdout(tracking_uri: str, run, folder: Path) -> str:
    """The trial's own log lines, as its child run holds them (artifact `logs/stdout`)."""
    from mlflow import MlflowClient

    folder = folder / run.info.run_id
    folder.mkdir(parents=True, exist_ok=True)
    client = MlflowClient(tracking_uri=tracking_uri)
    return Path(client.download_artifacts(run.info.run_id, "logs/stdout", str(folder))).read_text()


def parent_runs(tracking_uri: str, study: str) -> list:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=tracking_uri)
    experiment = client.get_experiment_by_name(study)
    return client.search_runs(
        [experiment.experiment_id], filter_string="tags.`vitscale.role` = 'study'", max_results=100
    )


def arm_optuna_studies(execution: Path, arms: int) -> list[str]:
    """The Optuna studies of a comparison's arms, all in the execution's one `optuna.db` (in the
    order the arms were tuned), checking each has its metric names set (what optuna-dashboard
    labels the objective with) and that no arm kept a database of its own."""
    import optuna

    url = f"sqlite:///{execution / 'optuna.db'}"
    names = [summary.study_name for summary in optuna.get_all_study_summaries(url)]
    assert len(names) == arms, names
    for name in names:
        assert optuna.load_study(study_name=name, storage=url).metric_names == ["val_top1"]
    assert not list(execution.glob("tune-*/optuna.db"))
    return names
