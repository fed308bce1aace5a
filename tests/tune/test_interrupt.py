"""Ctrl-C and SIGTERM stop a study gracefully and the record tells the truth: exit 130 / 143, the
resume command printed, only trials that ran every epoch FINISHED, the rest and the parent
KILLED; `study resume` then finishes exactly the plan. What the terminal shows of that resume is
vitscale's lines only: a line at once (importing Ray and starting it take half a minute on a busy
laptop), then where Ray keeps its logs; nothing of Ray's workers: no SystemExit traceback of a
worker Ray stops at the end, no "Restored on ... from checkpoint" of a resumed trial (they go to
the trial logs and Ray's session logs). One run serves both: each is a study start, stop and
resume on real Ray."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest
from study_helpers import (
    Terminal,
    child_runs,
    parent_runs,
    start_vitscale,
    wait_or_kill,
    write_study,
)

# Trials still to run when the signal comes, and a window of 5 epochs (polled every 0.05 s) to
# catch the second trial with a checkpoint and unfinished.
EPOCHS = 6
WORKER_NOISE = ("Traceback", "SystemExit", "Restored on", "(pid=", "(train_trial", "(raylet")
READY = re.compile(r"in-process Ray ready in (\d+) s; its logs: (\S+)")


def _study(tmp_path):
    return write_study(
        tmp_path,
        "interrupt-tiny",
        space={
            "model.mixer": {"grid": ["attention", "ssog"]},
            "model.regime": {"grid": ["discrete", "looped"]},
        },
        search={"algorithm": "grid", "max_concurrent_trials": 1},
    )


def _epochs(result_file) -> int:
    try:
        return result_file.read_text().count("\n")
    except OSError:
        return 0


def _run_until_a_trial_finished(tmp_path, results, log, and_one_checkpointed=False):
    """The study driver, once one trial ran every epoch (and, with `and_one_checkpointed`, once
    another has a checkpoint to be restored from and is unfinished)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    command = ["study", "run", str(_study(tmp_path)), "--tracking-uri", uri, "--storage", str(results)]
    command += ["--num-cpus", "1", "--quiet", "--set", f"trial.train.epochs={EPOCHS}"]
    driver = start_vitscale(*command, cwd=tmp_path, log=log, start_new_session=True)
    deadline = time.time() + 300
    while not _ready_to_stop(
        [_epochs(f) for f in results.glob("interrupt-tiny/*/*/result.json")], and_one_checkpointed
    ):
        if driver.poll() is not None or time.time() > deadline:
            driver.kill()
            pytest.fail("the study ended (or no trial finished) before it could be interrupted")
        time.sleep(0.05)
    return driver, uri


def _ready_to_stop(epochs: list[int], and_one_checkpointed: bool) -> bool:
    finished = any(n >= EPOCHS for n in epochs)
    return finished and (not and_one_checkpointed or any(0 < n < EPOCHS for n in epochs))


def _files_saying(words: str, *folders: Path) -> list[Path]:
    files = [f for folder in folders for f in folder.rglob("*") if f.is_file() and f.suffix != ".pt"]
    return [f for f in files if words in f.read_text(errors="replace")]


def _check_the_record(uri):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    (parent,) = parent_runs(uri, "interrupt-tiny")
    assert parent.info.status == "KILLED"
    runs = child_runs(uri, "interrupt-tiny")
    assert runs and not [r for r in runs if r.info.status == "RUNNING"]
    for run in runs:
        steps = [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")]
        if run.data.tags["vitscale.status"] == "FINISHED":
            assert steps == list(range(1, EPOCHS + 1)) and run.data.tags["vitscale.stopped_early"] == "false"
        else:
            assert run.data.tags["vitscale.status"] == "KILLED" and run.info.status == "KILLED"
            assert "interrupted" in run.data.tags["vitscale.failure_reason"]
    return sum(r.data.tags["vitscale.status"] == "FINISHED" for r in runs)


def _stopped_by(tmp_path, send, and_one_checkpointed=False) -> tuple[int, str, str, object]:
    """(exit code, output, tracking URI, storage) of a study that `send(driver)` signalled."""
    results = tmp_path / "results"
    with open(tmp_path / "driver.log", "w") as log:
        driver, uri = _run_until_a_trial_finished(tmp_path, results, log, and_one_checkpointed)
        send(driver)
        code = wait_or_kill(driver)
    output = (tmp_path / "driver.log").read_text()
    assert "Traceback" not in output and "Tuner.restore" not in output, output[-3000:]
    return code, output, uri, results


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ctrl_c_stops_the_study_truthfully_and_resume_finishes_the_plan_showing_only_vitscales_lines(
    tmp_path,
):
    # what Ctrl-C in a terminal sends: SIGINT to the whole process group; by then one trial is to
    # be restored from its checkpoint on resume
    code, output, uri, results = _stopped_by(
        tmp_path, lambda driver: os.killpg(driver.pid, signal.SIGINT), and_one_checkpointed=True
    )
    assert code == 130, output[-3000:]
    assert f"vitscale study resume {results / 'interrupt-tiny'}" in output, output[-3000:]
    assert output.splitlines()[0] == "interrupt-tiny: starting Ray in this process ...", output[:2000]
    assert _check_the_record(uri) < 4

    resume = ["study", "resume", "interrupt-tiny", "--storage", str(results), "--num-cpus", "1"]
    with Terminal(*resume, cwd=tmp_path) as done:
        assert done.wait() == 0, done.text[-4000:]
    assert "4 trials — 4 finished" in done.text
    (parent,) = parent_runs(uri, "interrupt-tiny")
    assert parent.info.status == "FINISHED"
    finished = [r for r in child_runs(uri, "interrupt-tiny") if r.data.tags["vitscale.status"] == "FINISHED"]
    assert len({r.data.tags["vitscale.trial_id"] for r in finished}) == 4

    for word in WORKER_NOISE:
        assert word not in done.text, done.text[-4000:]
    (first_at, first), *_ = done.lines
    assert first == "interrupt-tiny: starting Ray in this process ...", done.text[:2000]
    # printed before Ray was imported and started, not after: the ready line follows by at least
    # the seconds Ray took to start, as it counts them
    [(ready_at, ready)] = [(at, line) for at, line in done.lines if READY.search(line)]
    seconds, logs = READY.search(ready).groups()
    assert ready_at - first_at >= int(seconds) - 1, done.lines[:5]
    assert Path(logs).is_dir() and Path(logs).parent.name.startswith("session_")
    assert not [line for _, line in done.lines if "dashboard" in line]  # in-process Ray serves none
    assert done.lines[-1][1].startswith("execution folder: "), done.text[-2000:]
    # the restore happened, and its line went where it belongs (the trial's or Ray's logs), not here
    assert _files_saying("Restored on", Path(logs), results), (logs, results)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_stops_the_study_truthfully_with_exit_143(tmp_path):
    # a process manager's stop: SIGTERM to the driver alone
    code, output, uri, _ = _stopped_by(tmp_path, lambda driver: driver.send_signal(signal.SIGTERM))
    assert code == 143 and "vitscale study resume" in output, output[-3000:]
    _check_the_record(uri)
