"""The progress line of a study: counts, best by seed mean, ETA, one line per change of state (a
real study with --quiet printing those lines and not Ray's table: test_study_local.py's grid study)."""

from __future__ import annotations

import pickle
import time
from types import SimpleNamespace

import pytest

from vitscale.tracking.seed_mean import ConfigMean
from vitscale.tune import progress_line
from vitscale.tune.progress import (
    ProgressCallback,
    Snapshot,
    StudyTally,
    duration,
    eta_s,
    snapshot_of_trials,
    track_study,
)

OBJECTIVE = ("val_top1", "max")


def trial(status, point, seed, val=None, epoch=2, planned=2, seconds=30.0, reason=""):
    result = {"epoch": epoch, "planned_epochs": planned, "time_total_s": seconds, "failure_reason": reason}
    if val is not None:
        result["val_top1"] = val
    if status in ("PENDING", "RUNNING") and val is None:
        result = {}
    return SimpleNamespace(status=status, last_result=result, config={"point": point, "seed": seed})


ATT = {"model.mixer": "attention", "model.regime": "looped"}
SSOG = {"model.mixer": "ssog", "model.regime": "discrete", "model.width": 64}


def test_the_line_says_phase_counts_best_with_n_elapsed_and_eta():
    best = ConfigMean("k", "ssog · discrete · w64", 3, {"val_top1": 0.8614})
    snapshot = Snapshot(
        "fashion-scaling", "final", 37, 2, 0, 216, "val_top1", best, elapsed_s=724, eta_s=3480
    )
    assert snapshot.line() == (
        "[fashion-scaling] final  37/216 done · 2 running · 0 failed · best val_top1 0.861 (n=3) "
        "ssog · discrete · w64 · elapsed 12m04s · ETA 58m00s"
    )
    empty = Snapshot("quickstart", "", 0, 2, 0, 18, "val_top1", None, elapsed_s=5)
    assert empty.line() == (
        "[quickstart] 0/18 done · 2 running · 0 failed · best val_top1 – · elapsed 5s · ETA –"
    )
    assert [duration(s) for s in (0, 59.4, 61, 3600 + 5 * 60 + 9)] == ["0s", "59s", "1m01s", "1h05m"]


def test_best_is_the_seed_mean_not_one_lucky_seed_and_failures_and_early_stops_are_counted():
    trials = [
        trial("TERMINATED", ATT, 2, val=0.8811),  # the lucky seed of the issue
        trial("TERMINATED", ATT, 0, val=0.70),
        trial("TERMINATED", ATT, 1, val=0.71),
        trial("TERMINATED", SSOG, 0, val=0.80),
        trial("TERMINATED", SSOG, 1, val=0.81),
        trial("TERMINATED", SSOG, 2, val=0.99, epoch=1),  # stopped early: counted done, never averaged
        trial("TERMINATED", SSOG, 3, val=float("nan"), reason="diverged"),  # reported failure
        trial("ERROR", SSOG, 4),  # raised, retries exhausted
        trial("RUNNING", ATT, 3),
        trial("PENDING", ATT, 4),
    ]
    snapshot = snapshot_of_trials(trials, "s", "", 12, OBJECTIVE)
    assert (snapshot.done, snapshot.running, snapshot.failed) == (6, 1, 2)
    assert snapshot.best.label == "ssog · discrete · w64" and snapshot.best.n == 2
    assert snapshot.best.means["val_top1"] == pytest.approx(0.805)
    line = snapshot.line()
    assert "6/12 done · 1 running · 2 failed · best val_top1 0.805 (n=2) ssog · discrete · w64" in line


def test_a_final_phase_names_its_best_by_arm():
    point = {**SSOG, "train.lr": 0.003}
    trials = [trial("TERMINATED", point, s, val=0.8) for s in (100, 101)]
    snapshot = snapshot_of_trials(trials, "s", "final", 4, OBJECTIVE, ["model.mixer", "model.regime"])
    assert snapshot.best.label == "ssog · discrete" and snapshot.best.n == 2


def test_a_benchmark_line_names_no_best_across_resolutions():
    points = [{"mixer": "ssog", "regime": "discrete", "resolution": r} for r in (32, 64)]
    trials = [trial("TERMINATED", p, 0, epoch=1, planned=1) for p in points]
    snapshot = snapshot_of_trials(trials, "bench", "", 14, None)
    assert snapshot.best is None and "best" not in snapshot.line()
    assert snapshot.line() == "[bench] 2/14 done · 0 running · 0 failed · ETA –"


def test_eta_is_wall_time_per_ended_trial_times_trials_left():
    assert eta_s(0, 10, 50.0) is None
    assert eta_s(4, 10, 120.0) == pytest.approx(300.0)
    assert eta_s(1, 0, 60.0) == 0.0


def test_one_line_per_change_of_state_and_a_heartbeat_otherwise(capsys):
    now = [100.0]
    callback = ProgressCallback(
        "tiny", 4, OBJECTIVE, phase="tune arm 1/2 attention", heartbeat_s=3600, clock=lambda: now[0]
    )
    callback.setup()
    running = [trial("RUNNING", ATT, 0), trial("RUNNING", ATT, 1)]
    callback.on_trial_start(0, running, running[0])
    callback.on_step_end(1, running)  # where the experiment starts from
    callback.on_step_end(2, running)  # nothing changed, heartbeat far off: silent
    now[0] = 140.0
    callback.on_trial_complete(3, running, running[0])
    ended = [trial("TERMINATED", ATT, 0, val=0.5, seconds=40.0), running[1]]
    callback.on_step_end(3, ended)
    callback.on_experiment_end(ended)  # nothing new since the last line
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("[tiny] tune arm 1/2 attention  0/4 done · 2 running · 0 failed")
    assert lines[0].endswith("ETA –")
    assert "1/4 done · 1 running · 0 failed · best val_top1 0.500 (n=1) attention · looped" in lines[1]
    assert lines[1].endswith("ETA 2m00s")  # 40 s of wall time per ended trial x 3 left

    callback.heartbeat_s = 0  # due: a line without a change
    callback.on_step_end(4, ended)
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_a_pickled_callback_resumes_with_a_fresh_clock_and_prints_at_once():
    callback = ProgressCallback("tiny", 4, OBJECTIVE, since=1.0)
    callback.setup()
    callback.on_trial_start(0, [trial("RUNNING", ATT, 0)], None)
    callback._changed = False
    restored = pickle.loads(pickle.dumps(callback))
    assert restored.since is None and restored._changed and restored.planned == 4
    assert restored._first_start is None and restored.clock is time.monotonic  # this driver's own clock


def test_a_comparison_phase_line_counts_the_whole_study_and_is_the_record_status_reads(tmp_path, capsys):
    """The issue: `4/4 done … ETA 0s` at the end of arm 1 of 4 while 6/28 of the study were done."""
    now = [100.0]
    tally = StudyTally(planned=28)
    tally.ended_elsewhere(5, 1)  # earlier phases (read from MLflow as each phase starts)
    track_study(tmp_path, tally)
    callback = ProgressCallback(
        "cmp", 4, OBJECTIVE, phase="tune arm 2/4 ssog", clock=lambda: now[0], record=tmp_path, whole=True
    )
    callback.setup()
    running = [trial("RUNNING", ATT, 0), trial("RUNNING", ATT, 1)]
    callback.on_trial_start(0, running, running[0])
    callback.on_step_end(1, running)
    now[0] = 160.0
    callback.on_trial_complete(2, running, running[0])
    ended = [trial("TERMINATED", ATT, 0, val=0.888), running[1]]
    callback.on_step_end(2, ended)
    first, last = capsys.readouterr().out.splitlines()
    assert first.endswith("ETA – — study 5/28 done · 1 failed · ETA –"), first
    # 1 trial ended in this driver's 60 s, 21 of 28 left; the phase: 1 ended in 60 s, 3 left
    assert last.endswith("ETA 3m00s — study 6/28 done · 1 failed · ETA 21m00s"), last
    assert "1/4 done · 1 running · 0 failed · best val_top1 0.888 (n=1)" in last

    record = progress_line.read(tmp_path)
    assert record.state == "running" and record.snapshot.line() == last  # the very line printed
    shown = record.status_snapshot(record.written + 60).line()
    assert "best val_top1 0.888 (n=1)" in shown and "updated 1m00s ago" in shown and "elapsed" not in shown
    assert shown.endswith("ETA 2m00s — study 6/28 done · 1 failed · ETA 20m00s"), shown  # less 1 min
    progress_line.mark(tmp_path, "finished")
    finished = progress_line.read(tmp_path)
    assert finished.state == "finished"
    assert finished.status_snapshot(finished.written).line().endswith("— study 6/28 done · 1 failed")

    restored = pickle.loads(pickle.dumps(callback))  # a phase Tune restores finds the tally again
    assert restored.snapshot(ended).whole.done == 6


def test_the_line_of_a_study_that_is_not_a_comparison_has_no_study_part(capsys):
    callback = ProgressCallback("tiny", 2, OBJECTIVE)
    callback.setup()
    callback.on_step_end(0, [trial("RUNNING", ATT, 0)])
    assert "— study" not in capsys.readouterr().out
