"""A study's progress as one line per change of state, on every `study run` and `study resume`.

    [fashion-scaling] final  37/216 done · 2 running · 0 failed · best val_top1 0.861 (n=3) ssog · discrete · w64 · elapsed 12m04s · ETA 58m

Ray's own status table (off unless `--verbose`) repeats a full table every few seconds and never
names a comparison's phase or arm; this line does, once per change (a trial started, finished or
failed) and otherwise at most every `heartbeat_s`. "best" is the best configuration by seed mean
of the first objective (`tracking.seed_mean`), with its number of seeds; a benchmark shows none (its
configurations compare only within one resolution: `study run` ends with those fronts). The ETA is
the wall time per trial ended since this driver's first trial started x the trials left, "–" until
one ended: start-up, scheduling and the concurrency actually reached are in it (the mean trial
duration over the peak of trials running at once counted neither, and a benchmark study that times
one trial at a time was given half its ETA).

A comparison runs one Tune experiment per phase; its driver keeps one `StudyTally` for the whole
study, so each phase's line also says, after a dash, the trials ended in every phase against all
the study plans and the ETA of the rest, on the driver's clock since its first trial started.
Every line printed is also written to the execution folder (`tune.progress_line`): `study status`
shows that line.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune import Callback

from vitscale.tracking.seed_mean import Replicate, best_configs, config_label, seed_means
from vitscale.tracking.tune_callback import RESULT_FAILURE_REASON, RESULT_PLANNED_EPOCHS
from vitscale.tune import progress_line
from vitscale.tune.progress_line import Snapshot, StudyCount, duration, eta_s  # noqa: F401 - the line's names

HEARTBEAT_S = 60.0


@dataclass
class StudyTally:
    """A comparison's whole study across its phases, kept by its driver: trials ended in the phases
    other than the one running (`ended_elsewhere`, set as each phase starts), and its own clock."""

    planned: int
    done_elsewhere: int = 0
    failed_elsewhere: int = 0
    first_start: float | None = None  # on the callbacks' clock: this driver's first trial start
    ended_at_first_start: int = 0

    def ended_elsewhere(self, done: int, failed: int) -> None:
        self.done_elsewhere, self.failed_elsewhere = done, failed

    def started(self, phase_ended: int, now: float) -> None:
        if self.first_start is None:
            self.first_start = now
            self.ended_at_first_start = self.done_elsewhere + self.failed_elsewhere + phase_ended

    def count(self, phase: Snapshot, now: float) -> StudyCount:
        done, failed = self.done_elsewhere + phase.done, self.failed_elsewhere + phase.failed
        count = StudyCount(done, failed, self.planned)
        if self.first_start is not None:
            ended = done + failed
            count.eta_s = eta_s(
                ended - self.ended_at_first_start, self.planned - ended, now - self.first_start
            )
        return count


# Execution folder -> its comparison driver's tally. A registry, not an attribute: a phase restored
# from Tune's saved state brings back its callback unpickled, which finds the tally here.
_TALLIES: dict[str, StudyTally] = {}


def track_study(directory: Path, tally: StudyTally) -> None:
    """The phases' lines of the execution in `directory` count the whole study with `tally`."""
    _TALLIES[str(Path(directory).resolve())] = tally


def tally_of(directory: Path) -> StudyTally | None:
    """The tally `track_study` registered for the execution in `directory`, if any."""
    return _TALLIES.get(str(Path(directory).resolve()))


def trial_outcome(status: str, result: dict) -> str:
    """'running', 'done', 'stopped' (ended before its planned epochs), 'failed' or 'pending' of a
    Tune trial, from its status and last result (failures are reported, not raised)."""
    if status == "ERROR" or (status == "TERMINATED" and result.get(RESULT_FAILURE_REASON)):
        return "failed"
    if status == "TERMINATED":
        planned, epoch = result.get(RESULT_PLANNED_EPOCHS), result.get("epoch")
        return "stopped" if planned is not None and epoch is not None and epoch < planned else "done"
    return "running" if status == "RUNNING" else "pending"


def snapshot_of_trials(
    trials,
    study: str,
    phase: str,
    planned: int | None,
    objective: tuple[str, str] | None,
    label_keys=None,
    replicates: dict[str, Replicate] | None = None,
) -> Snapshot:
    """The snapshot of Tune trials (without times). Only the objective is averaged (the line shows
    no other metric), and `replicates` (trial id -> its Replicate, kept by the caller) saves
    reading a finished trial again at every line: the driver prints one per change, so a study of
    n trials takes n snapshots of up to n trials each."""
    counts = {"done": 0, "stopped": 0, "running": 0, "failed": 0, "pending": 0}
    done = []
    for trial in trials:
        result = trial.last_result or {}
        outcome = trial_outcome(trial.status, result)
        counts[outcome] += 1
        if outcome == "done" and objective:
            trial_id = getattr(trial, "trial_id", None)
            replicate = replicates.get(trial_id) if replicates is not None else None
            if replicate is None:
                replicate = _replicate(trial, result, objective[0], label_keys)
                if replicates is not None and trial_id is not None:
                    replicates[trial_id] = replicate
            done.append(replicate)
    best = best_configs(seed_means(done), [objective]) if objective else []
    snapshot = Snapshot(
        study=study,
        phase=phase,
        done=counts["done"] + counts["stopped"],
        running=counts["running"],
        failed=counts["failed"],
        planned=planned,
        objective=objective[0] if objective else "",
        best=best[0] if best else None,
    )
    return snapshot


def _replicate(trial, result: dict[str, Any], metric: str, label_keys) -> Replicate:
    point = (trial.config or {}).get("point") or {}
    values = {k: point.get(k) for k in label_keys} if label_keys else point
    key = json.dumps(point, sort_keys=True, default=str)
    return Replicate(key, config_label(values), {k: v for k, v in _metrics(result).items() if k == metric})


def _metrics(result: dict[str, Any]) -> dict[str, float]:
    return {k: float(v) for k, v in result.items() if isinstance(v, int | float) and not isinstance(v, bool)}


class ProgressCallback(Callback):
    """Prints the progress line of one Tune experiment (a study, or a comparison's phase).

    `label_keys`: the point's keys that name a configuration (a comparison's final phase: the arm
    fields); default the whole point. `since`: when the study started (time.time()), so a
    comparison's phases share one elapsed clock; default: when this experiment starts.
    `record`: the execution folder, where each line is also written (`progress_line.write`);
    `whole`: a comparison's phase, whose line adds the whole study (`track_study`)."""

    def __init__(
        self,
        study: str,
        planned: int | None,
        objective: tuple[str, str] | None,
        phase: str = "",
        label_keys: list[str] | None = None,
        heartbeat_s: float = HEARTBEAT_S,
        since: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        record: Path | None = None,
        whole: bool = False,
    ) -> None:
        self.study = study
        self.planned = planned
        self.objective = tuple(objective) if objective else None  # None: no "best" (benchmarks)
        self.phase = phase
        self.label_keys = list(label_keys) if label_keys else None
        self.heartbeat_s = heartbeat_s
        self.since = since
        self.record = record
        self.whole = whole
        self._started: float | None = None
        self._printed_at = 0.0
        self._changed = True  # the first step prints where the experiment starts from
        self.clock = clock
        self._first_start: float | None = None  # on `clock`: when this driver started its first trial
        self._ended_before = 0  # trials that had ended by then (a resumed study's)
        self._replicates: dict[str, Replicate] = {}  # finished trial id -> its replicate

    def __getstate__(self) -> dict:
        """Pickled with the experiment: a resumed study starts a fresh clock and prints at once."""
        state = self.__dict__.copy()
        state.update(
            since=None,
            _started=None,
            _printed_at=0.0,
            _changed=True,
            _first_start=None,
            _ended_before=0,
            _replicates={},
        )
        state.pop("clock")
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state, clock=time.monotonic)
        self.__dict__.setdefault("_replicates", {})  # pickled before it kept them

    def setup(self, **info) -> None:
        self._started = self.since or time.time()

    def snapshot(self, trials) -> Snapshot:
        snapshot = snapshot_of_trials(
            trials, self.study, self.phase, self.planned, self.objective, self.label_keys, self._replicates
        )
        snapshot.elapsed_s = time.time() - (self._started or time.time())
        if self.planned is not None and self._first_start is not None:
            ended = snapshot.done + snapshot.failed
            snapshot.eta_s = eta_s(
                ended - self._ended_before, self.planned - ended, self.clock() - self._first_start
            )
        tally = self._tally()
        if tally is not None:
            snapshot.whole = tally.count(snapshot, self.clock())
        return snapshot

    def _tally(self) -> StudyTally | None:
        return tally_of(self.record) if self.whole and self.record is not None else None

    def on_trial_start(self, iteration: int, trials, trial, **info) -> None:
        self._changed = True
        if self._first_start is None:
            self._first_start = self.clock()
            ended = snapshot_of_trials(trials, self.study, self.phase, self.planned, None)
            self._ended_before = ended.done + ended.failed
        tally = self._tally()
        if tally is not None:
            tally.started(self._ended_before, self._first_start)

    def on_trial_complete(self, iteration: int, trials, trial, **info) -> None:
        self._changed = True

    def on_trial_error(self, iteration: int, trials, trial, **info) -> None:
        self._changed = True

    def on_step_end(self, iteration: int, trials, **info) -> None:
        now = time.monotonic()
        if self._changed or now - self._printed_at >= self.heartbeat_s:
            self._print(trials, now)

    def on_experiment_end(self, trials, **info) -> None:
        if self._changed:  # a change after the last step's line
            self._print(trials, time.monotonic())

    def _print(self, trials, now: float) -> None:
        self._changed, self._printed_at = False, now
        snapshot = self.snapshot(trials)
        print(snapshot.line(), flush=True)
        if self.record is not None:
            try:
                progress_line.write(self.record, snapshot)
            except OSError:
                pass  # a full or read-only disk stops the study through its own checks; the line is printed
