"""`vitscale study status` on this machine: every study of a storage folder, from a second terminal.

Each `<storage>/<study>/latest` names the study's newest execution; its `vitscale-study.json`
holds the spec, the tracking URI and the MLflow parent run, whose child runs say where every trial
stands. The line is the progress line of `study run` (`tune.progress`): done / running / failed /
planned, the best configuration by seed mean, when the study last changed and, while it runs, an
ETA. A study whose record or MLflow store cannot be read gets one line saying so; the others are
still listed.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from vitscale.errors import UserError
from vitscale.study import StudySpec, count_trials
from vitscale.study.comparison import arm_list
from vitscale.tracking import layout, store
from vitscale.tune import storage as storage_mod
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.progress import Snapshot, eta_s
from vitscale.tune.summary import best_by_seed_mean, child_runs, trial_row

DEFAULT_STORAGE = "ray_results"
ENDED = ("FINISHED", "FAILED")


@dataclass
class LocalStudy:
    """One study's newest execution as `study status` lists it."""

    name: str
    directory: Path
    state: str = ""  # the parent run's MLflow status: RUNNING, FINISHED, FAILED, KILLED
    snapshot: Snapshot | None = None
    problem: str = ""  # why it could not be read

    def line(self) -> str:
        if self.problem:
            return f"[{self.name}] {self.problem}"
        return f"{self.snapshot.line()} · {self.state.lower()} (execution {self.directory.name})"


def local_studies(storage: str | None = None, name: str | None = None) -> list[LocalStudy]:
    """The studies under `storage` (default ./ray_results), or the one called `name`, by name."""
    root = storage_mod.resolve(storage or DEFAULT_STORAGE)
    latest = sorted(root.glob(f"{name or '*'}/{storage_mod.LATEST_FILE}"))
    if not latest:
        which = f"no execution of {name}" if name else "no study executions"
        raise UserError(
            f"--storage: {which} under {root}; run one with `vitscale study run FILE`, pass --storage "
            "where it ran, or --address for studies submitted to a cluster"
        )
    return [study_status(path.parent / path.read_text().strip(), path.parent.name, root) for path in latest]


def study_status(directory: Path, name: str, root: Path) -> LocalStudy:
    """One execution folder -> its line; a problem is reported in the line, not raised."""
    study = LocalStudy(name, directory)
    try:
        record = storage_mod.read_state(directory / storage_mod.STATE_FILE)
        spec = StudySpec.model_validate(record["spec"])
        client = _client(record["tracking_uri"], root)
        parent = client.get_run(record["parent_run_id"])
        runs = child_runs(client, record["experiment_id"], record["parent_run_id"])
    except (UserError, ValidationError, KeyError, TypeError) as exc:
        study.problem = (
            str(exc).splitlines()[0] if isinstance(exc, UserError) else f"unreadable record ({exc})"
        )
        return study
    except Exception as exc:  # MLflow's errors vary by store; one study must not end the listing
        study.problem = f"MLflow: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
        return study
    study.state = parent.info.status
    study.snapshot = _snapshot(spec, parent, runs, directory)
    return study


def _client(uri: str, root: Path):
    """The execution's tracking store, never a new empty one. A relative SQLite path is the
    driver's working directory: here, or (the default layout) the folder holding the storage."""
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_absolute():
        relative = uri.removeprefix("sqlite:///")
        found = next((d / relative for d in (Path.cwd(), root.parent) if (d / relative).is_file()), None)
        if found is None:
            raise UserError(
                f"MLflow store {relative} not found here or in {root.parent}; run from where the study ran"
            )
        uri = f"sqlite:///{found}"
    elif uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).is_file():
        raise UserError(f"MLflow store {uri.removeprefix('sqlite:///')} not found")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # a dead server: one line, not minutes
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
    store.check_tracking_uri(uri, timeout=3.0)
    return store.client_for(uri)


def _snapshot(spec, parent, runs, directory: Path) -> Snapshot:
    trials = [trial_row(run) for run in runs]
    statuses = [t.status for t in trials]
    kind = TUNE_KINDS[spec.kind]
    ranked = kind.best_of(spec)  # a benchmark: fronts per resolution, not one best
    best = best_by_seed_mean(trials, [ranked], spec) if ranked else {}
    planned = parent.data.tags.get(layout.PLANNED_TRIALS, "")
    planned = int(planned) if planned.isascii() and planned.isdigit() else count_trials(spec)
    snapshot = Snapshot(
        study=spec.name,
        phase=kind.status_phase(spec, runs),
        done=statuses.count("FINISHED"),
        running=statuses.count("RUNNING"),
        failed=statuses.count("FAILED"),
        planned=planned,
        objective=ranked[0] if ranked else "",
        best=next(iter(best.values()), [None])[0],
        updated_s=time.time() - _last_change(parent, runs, directory),
        show_eta=parent.info.status == "RUNNING",
    )
    if snapshot.show_eta:
        ended = [r for r in runs if _ended(r)]
        span_s = (
            (max(r.info.end_time for r in ended) - min(r.info.start_time for r in runs)) / 1000
            if ended
            else 0.0
        )
        remaining = snapshot.planned - snapshot.done - snapshot.failed
        snapshot.eta_s = eta_s(len(ended), remaining, span_s)  # over the span in which trials ended
    return snapshot


def _ended(run) -> bool:
    return run.data.tags.get(layout.STATUS) in ENDED and bool(run.info.end_time and run.info.start_time)


def no_phase(spec, runs) -> str:
    """A study that is one Tune experiment has no phase to show."""
    return ""


def arm_phase(spec, runs) -> str:
    """A comparison's phase now: `tune arm 2/4 ssog · ode`, `confirm arm 2/4 ssog · ode` or
    `final`, from its running trials."""
    running = [r.data.tags for r in runs if r.data.tags.get(layout.STATUS) == "RUNNING"]
    if any(t.get(layout.PHASE) == "final" for t in running):
        return "final"
    keys = [layout.arm_key(arm) for arm in arm_list(spec)]
    for tags in running:
        if tags.get(layout.ARM) in keys:
            arm, phase = tags[layout.ARM], tags.get(layout.PHASE) or "tune"
            return f"{phase} arm {keys.index(arm) + 1}/{len(keys)} {layout.arm_display(arm)}"
    return ""


def _last_change(parent, runs, directory: Path) -> float:
    """Seconds since the epoch of the latest run start or end, or Tune state save, in this execution."""
    times = [parent.info.start_time or 0, parent.info.end_time or 0]
    times += [t or 0 for r in runs for t in (r.info.start_time, r.info.end_time)]
    latest = max(times) / 1000
    for state in [*directory.glob("experiment_state*.json"), *directory.glob("*/experiment_state*.json")]:
        latest = max(latest, state.stat().st_mtime)
    return latest


def watch(render, every: float) -> None:
    """Call `render()` every `every` seconds until Ctrl-C, clearing the terminal in between."""
    try:
        while True:
            text = render()
            print("\033[H\033[2J" + text, flush=True)
            time.sleep(every)
    except KeyboardInterrupt:
        pass
