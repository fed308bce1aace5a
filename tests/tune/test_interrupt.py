"""Ctrl-C and SIGTERM stop a study gracefully and the record tells the truth: exit 130 / 143, the
resume command printed, only trials that ran every epoch FINISHED, the rest and the parent
KILLED; `study resume` then finishes exactly the plan."""

from __future__ import annotations

import os
import signal
import time

import pytest
from study_helpers import child_runs, parent_runs, start_vitscale, vitscale, wait_or_kill, write_study

EPOCHS = 12  # long enough that trials are still to run when the signal comes


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


def _run_until_a_trial_finished(tmp_path, results, log):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    command = ["study", "run", str(_study(tmp_path)), "--tracking-uri", uri, "--storage", str(results)]
    command += ["--num-cpus", "1", "--quiet", "--set", f"trial.train.epochs={EPOCHS}"]
    driver = start_vitscale(*command, cwd=tmp_path, log=log, start_new_session=True)
    deadline = time.time() + 300
    while not any(_epochs(f) >= EPOCHS for f in results.glob("interrupt-tiny/*/*/result.json")):
        if driver.poll() is not None or time.time() > deadline:
            driver.kill()
            pytest.fail("the study ended (or no trial finished) before it could be interrupted")
        time.sleep(0.05)
    return driver, uri


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


def _stopped_by(tmp_path, send) -> tuple[int, str, str, object]:
    """(exit code, output, tracking URI, storage) of a study that `send(driver)` signalled."""
    results = tmp_path / "results"
    with open(tmp_path / "driver.log", "w") as log:
        driver, uri = _run_until_a_trial_finished(tmp_path, results, log)
        send(driver)
        code = wait_or_kill(driver)
    output = (tmp_path / "driver.log").read_text()
    assert "Traceback" not in output and "Tuner.restore" not in output, output[-3000:]
    return code, output, uri, results


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_ctrl_c_stops_the_study_truthfully_and_resume_finishes_the_plan(tmp_path):
    # what Ctrl-C in a terminal sends: SIGINT to the whole process group
    code, output, uri, results = _stopped_by(tmp_path, lambda driver: os.killpg(driver.pid, signal.SIGINT))
    assert code == 130, output[-3000:]
    assert f"vitscale study resume {results / 'interrupt-tiny'}" in output, output[-3000:]
    assert _check_the_record(uri) < 4

    done = vitscale(
        *["study", "resume", "interrupt-tiny", "--storage", str(results)], "--num-cpus", "1", cwd=tmp_path
    )
    assert "4 trials — 4 finished" in done.stdout
    (parent,) = parent_runs(uri, "interrupt-tiny")
    assert parent.info.status == "FINISHED"
    finished = [r for r in child_runs(uri, "interrupt-tiny") if r.data.tags["vitscale.status"] == "FINISHED"]
    assert len({r.data.tags["vitscale.trial_id"] for r in finished}) == 4


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_sigterm_stops_the_study_truthfully_with_exit_143(tmp_path):
    # a process manager's stop: SIGTERM to the driver alone
    code, output, uri, _ = _stopped_by(tmp_path, lambda driver: driver.send_signal(signal.SIGTERM))
    assert code == 143 and "vitscale study resume" in output, output[-3000:]
    _check_the_record(uri)
