"""`vitscale study status` of an execution without a progress record (begun before records
existed, or before its first line): its line rebuilt from MLflow.

The parent run's child runs say where every trial stands: done / running / failed against the
planned trials (the parent's tag), the best configuration by seed mean (a comparison: of its final
runs only), the phase of the running trials, when the study last changed and, while it runs, an
ETA over the span in which trials ended. Importing MLflow takes seconds: `tune.local_status` comes
here only where the execution folder has no progress record (`tune.progress_line`).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pydantic import ValidationError

from vitscale.errors import UserError
from vitscale.study import StudySpec, count_trials
from vitscale.study.comparison import arm_list
from vitscale.tracking import layout, store
from vitscale.tune import execution_files
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.local_status import LocalStudy
from vitscale.tune.progress_line import Snapshot, eta_s
from vitscale.tune.summary import best_by_seed_mean, child_runs, trial_row

ENDED = ("FINISHED", "FAILED")


def study_status_from_mlflow(directory: Path, name: str, root: Path) -> LocalStudy:
    """One execution folder -> its line; a problem is reported in the line, not raised."""
    study = LocalStudy(name, directory)
    try:
        record = execution_files.read_state(directory / execution_files.STATE_FILE)
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
