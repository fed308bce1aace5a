"""What a study prints in the terminal: vitscale's lines only. A line at once (importing Ray and
starting it take half a minute on a busy laptop), then where Ray keeps its logs; nothing of Ray's
workers: no SystemExit traceback of a worker Ray stops at the end, no "Restored on ... from
checkpoint" of a resumed trial (they go to the trial logs and Ray's session logs)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from study_helpers import REPO, cli_env

pytestmark = pytest.mark.slow

# The quickstart's 2 mixers x 3 regimes on one seed, a few epochs each (a copy in the test's folder).
QUICKSTART = ["quickstart.yaml", "--set", "search.seeds=[0]"]
WORKER_NOISE = ("Traceback", "SystemExit", "Restored on", "(pid=", "(train_trial", "(raylet")
READY = re.compile(r"in-process Ray ready in (\d+) s; its logs: (\S+)")


class Terminal:
    """The CLI in a subprocess, stdout and stderr as one terminal, each line with when it came."""

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
            start_new_session=True,  # a Ctrl-C below reaches its whole group, as in a terminal
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


@pytest.fixture
def folder(tmp_path) -> Path:
    shutil.copy(REPO / "studies" / "quickstart.yaml", tmp_path)
    return tmp_path


def _no_worker_noise(terminal: Terminal) -> None:
    for word in WORKER_NOISE:
        assert word not in terminal.text, terminal.text[-4000:]


def test_a_study_says_at_once_that_ray_starts_and_shows_none_of_rays_worker_lines(folder):
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    storage = str(folder / "results")
    with Terminal(
        "study", "run", *QUICKSTART, "--set", "trial.train.epochs=2",
        "--tracking-uri", uri, "--storage", storage, "--num-cpus", "2", cwd=folder,
    ) as run:  # fmt: skip
        assert run.wait() == 0, run.text[-4000:]
    _no_worker_noise(run)
    (first_at, first), *_ = run.lines
    assert first == "quickstart: starting Ray in this process ...", run.text[:2000]
    # printed before Ray was imported and started, not after: the ready line follows by at least
    # the seconds Ray took to start, as it counts them
    [(ready_at, ready)] = [(at, line) for at, line in run.lines if READY.search(line)]
    seconds, logs = READY.search(ready).groups()
    assert ready_at - first_at >= int(seconds) - 1, run.lines[:5]
    assert Path(logs).is_dir() and Path(logs).parent.name.startswith("session_")
    assert not [line for _, line in run.lines if "dashboard" in line]  # in-process Ray serves none
    assert "6 trials — 6 finished" in run.text


def _epochs_logged(storage: Path) -> int:
    return sum(f.read_text().count("\n") for f in storage.glob("quickstart/*/*/result.json"))


def test_a_resumed_study_shows_no_restored_from_checkpoint_lines(folder):
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    storage = folder / "results"
    common = ["--storage", str(storage), "--num-cpus", "2"]
    with Terminal(
        "study", "run", *QUICKSTART, "--set", "trial.train.epochs=6", "--tracking-uri", uri, *common,
        cwd=folder,
    ) as run:  # fmt: skip
        deadline = time.monotonic() + 600
        while _epochs_logged(storage) < 2:  # trials with a checkpoint to restore from, unfinished
            assert run.process.poll() is None and time.monotonic() < deadline, run.text[-4000:]
            time.sleep(0.05)
        os.killpg(run.process.pid, signal.SIGINT)  # Ctrl-C: Tune saves the study's state
        assert run.wait() == 130, run.text[-4000:]

    with Terminal("study", "resume", "quickstart", *common, cwd=folder) as resume:
        assert resume.wait() == 0, resume.text[-4000:]
    _no_worker_noise(resume)
    assert resume.lines[0][1] == "quickstart: starting Ray in this process ..."
    assert "6 trials — 6 finished" in resume.text
    assert resume.lines[-1][1].startswith("execution folder: "), resume.text[-2000:]
