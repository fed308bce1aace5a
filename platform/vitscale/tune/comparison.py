"""`kind: comparison` on Ray Tune: one tuning phase per arm, then one final phase.

Phases of one execution (`storage/<name>/<timestamp>/`):
- `tune-<i>`: arm i's own Tune experiment: the study's search (sampler or grid, `search.seeds`
  replicates, its own sampler seed and Optuna study, in the execution's one storage) over `space`
  with the arm's values (and `search.fidelity`) fixed in the trial. Every arm gets the same
  budget. ASHA, if any, sees this arm's trials only.
- `confirm-<i>` (tuned at a fidelity, `search.confirm.top_k` > 0): arm i's top_k qualified tuning
  points re-run at full fidelity on the first of `search.seeds`, FIFO; the arm's configuration is
  chosen among them (`tune.confirmation`), with Spearman's ρ between the two rankings.
- `final`: each arm's best point (validation only, see `tune.selection`) x `final.seeds`, FIFO;
  the trainer evaluates test once at the end of each run.
`comparison.json` records each finished phase (an arm's low-fidelity choice under `low_fidelity`
while its confirmation is pending, each arm's choice with the values at a range's edge) as it
ends. Resume skips finished phases, restores the Tune experiment of the interrupted one (its
finished trials are not re-run) and starts those not begun; an execution begun before
confirmation existed (its record has no `confirm_top_k`) keeps its arms alike and confirms none.
All runs are children of the study's parent run, tagged `vitscale.phase` and `vitscale.arm`; the
parent carries `vitscale.reference` and, per confirmed arm, `vitscale.rank_transfer` and the
metrics `arm/<arm>/rank_transfer_rho|n`.
"""

from __future__ import annotations

import functools
import json
import time
from dataclasses import replace
from pathlib import Path

from ray import tune

from vitscale.errors import UserError
from vitscale.range_edge import point_edges
from vitscale.study import count_trials
from vitscale.study.comparison import (
    arm_list,
    arm_study,
    arm_values,
    confirm_study,
    confirm_top_k,
    final_study,
)
from vitscale.tracking import layout, parent_summary, queued, store
from vitscale.tune import budget, confirmation, interrupt, optuna_study, progress_line, signed_storage
from vitscale.tune.comparison_record import RECORD_FILE
from vitscale.tune.execution_files import read_state, write_state
from vitscale.tune.phase_callback import PhaseCallback
from vitscale.tune.progress import ProgressCallback, StudyTally, tally_of, track_study
from vitscale.tune.selection import ArmChoice, choose
from vitscale.tune.summary import child_runs, close_completed, close_orphans, summarise
from vitscale.tune.tuned_from import borrowed_choices
from vitscale.tune.tuner import build_tuner, describe_trial, trainable_for

STATE_FILE = RECORD_FILE
ARTIFACT = layout.COMPARISON_ARTIFACT


def _load_state(directory: Path, spec) -> dict:
    """The execution's record; a new one confirms `confirm_top_k(spec)` points per arm."""
    fresh = {"choices": {}, "final_done": False, "confirm_top_k": confirm_top_k(spec)}
    state = read_state(directory / STATE_FILE, default=fresh)
    state.setdefault("confirm_top_k", 0)  # begun before confirmation existed: no arm confirms
    state.setdefault("low_fidelity", {})
    return state


def save_state(directory: Path, state: dict) -> None:
    write_state(directory / STATE_FILE, state)


def _fit(execution, phase: str, phase_spec, callback, progress, search=None, verbose: int = 1):
    """Run one phase's Tune experiment, or continue it where a killed driver left it."""
    _count_other_phases(execution, callback.phase, callback.arm)
    directory = execution.directory / phase
    directory.mkdir(exist_ok=True)
    if tune.Tuner.can_restore(str(directory)):
        tuner = tune.Tuner.restore(
            str(directory),
            trainable=trainable_for(phase_spec),
            resume_unfinished=True,
            resume_errored=True,
            storage_filesystem=signed_storage.filesystem(),  # verified as read, signed as written
        )
    else:
        phase_execution = replace(execution, directory=directory, spec=phase_spec)
        name = optuna_study.study_name(execution.spec.name, callback.arm)  # `<study>/<arm>`
        tuner = build_tuner(
            phase_execution, verbose, callback=callback, search=search, progress=progress, optuna_name=name
        )
    # A stop raises here: before an arm's point is chosen from a partial tuning phase.
    results, _ = interrupt.fit(tuner, execution, flush=lambda: _drain(execution))
    return results


def _callback(execution, phase_spec, phase: str, arm: dict | None, describe=None) -> PhaseCallback:
    return PhaseCallback(
        tracking_uri=execution.tracking_uri,
        experiment_id=execution.experiment_id,
        parent_run_id=execution.parent_run_id,
        study=execution.spec.name,
        kind=execution.spec.kind,
        describe=describe or functools.partial(describe_trial, spec=phase_spec),
        phase=phase,
        arm=arm,
        arm_fields=list(execution.spec.arms),
        fidelity=execution.spec.search.fidelity if phase == "tune" else None,
        checkpoints=execution.spec.tracking.checkpoints,
        objectives=[(o.metric, o.mode) for o in phase_spec.objectives],
    )


def _progress(execution, phase: str, planned: int | None, since: float, label_keys=None) -> ProgressCallback:
    """The progress line of one phase: `tune arm 2/4 ssog · ode` or `final` (arms named by
    their display names), on the study's elapsed clock, with the whole study's count beside it."""
    objective = execution.spec.objectives[0]
    return ProgressCallback(
        execution.spec.name,
        planned,
        (objective.metric, objective.mode),
        phase=phase,
        label_keys=label_keys,
        since=since,
        record=execution.directory,
        whole=True,
    )


def _count_other_phases(execution, phase: str, arm: dict | None) -> None:
    """The trials ended in every phase but the one starting, read from MLflow (the earlier phases
    of this driver and, on resume, of the one before); the phase's own come from its Tune trials."""
    tally = tally_of(execution.directory)
    if tally is None:
        return
    key = layout.arm_key(arm) if arm is not None else None
    client = store.client_for(execution.tracking_uri)
    statuses = [
        run.data.tags.get(layout.STATUS)
        for run in child_runs(client, execution.experiment_id, execution.parent_run_id)
        if not (
            run.data.tags.get(layout.PHASE) == phase and (key is None or run.data.tags.get(layout.ARM) == key)
        )
    ]
    tally.ended_elsewhere(statuses.count("FINISHED"), statuses.count("FAILED"))


def _drain(execution) -> None:
    """Send every queued MLflow write (`tracking.queued`) before reading MLflow or going on."""
    tracking = queued.close_all()
    if tracking.pending:
        raise UserError(
            f"{tracking.line()}; the tracking server {execution.tracking_uri} is still unreachable"
        )


def borrowed_state(spec, uri: str) -> dict | None:
    """`tuned_from`: each arm's borrowed choice, read before anything starts, so a source that
    cannot be used fails in one line with nothing recorded; saved with `save_state` (resume reuses it)."""
    if spec.tuned_from is None:
        return None
    choices, provenance = borrowed_choices(spec, uri)
    return {"choices": choices, "final_done": False, "tuned_from": provenance, "confirm_top_k": 0}


def _final_points(spec, choices: dict[str, dict]) -> list[dict]:
    """{arm keys..., matched key (match:), tuned keys...} for every arm that has a winner, in arm order."""
    return [
        {**arm_values(spec, c["values"]), **c["point"]} for c in choices.values() if c["point"] is not None
    ]


def run_comparison(execution, verbose: int = 1):
    """Every phase not yet done; then the parent run ends and the summary is read from MLflow."""
    spec = execution.spec
    client = store.client_for(execution.tracking_uri)
    state = _load_state(execution.directory, spec)
    tags = {layout.REFERENCE: json.dumps(spec.reference)}
    if state.get("tuned_from"):
        tags[layout.TUNED_FROM] = json.dumps(state["tuned_from"])
    store.set_tags(client, execution.parent_run_id, tags)
    queued.open_pending(execution.directory, execution.tracking_uri)  # left by a killed driver
    objective = spec.objectives[0]
    live: set = set()
    arms, since = arm_list(spec), time.time()
    track_study(execution.directory, StudyTally(count_trials(spec)))
    for i, arm in enumerate(arms):
        key = layout.arm_key(arm)
        if key in state["choices"]:
            continue
        phase_spec = arm_study(spec, arm)
        name = f"{i + 1}/{len(arms)} {layout.arm_display(key)}"  # the arm in progress lines
        if key in state["low_fidelity"]:  # tuned; its confirmation was interrupted
            choice = ArmChoice.from_json(state["low_fidelity"][key])
        else:
            callback = _callback(execution, phase_spec, "tune", arm)
            planned = None if budget.budget_of(phase_spec) else count_trials(phase_spec)
            progress = _progress(execution, f"tune arm {name}", planned, since)
            results = _fit(execution, f"tune-{i}", phase_spec, callback, progress, verbose=verbose)
            live |= {r.metrics.get("trial_id") for r in results if r.metrics}
            close_completed(client, execution, results)
            choice = choose(results, key, arm, list(spec.search.seeds), objective.metric, objective.mode)
            choice.budget = budget.report_spent(client, execution, phase_spec, results, key)
        top_k = state["confirm_top_k"]
        if top_k and choice.point is not None:
            state["low_fidelity"][key] = choice.to_json()
            save_state(execution.directory, state)
            choice, ended = _confirm(execution, i, arm, choice, top_k, f"confirm arm {name}", since, verbose)
            live |= ended
            _log_rank_transfer(client, execution.parent_run_id, key, choice, state)
        space = {k: p.model_dump(mode="json") for k, p in phase_spec.space.items()}
        choice.edges = point_edges(choice.point, space)
        state["choices"][key] = choice.to_json()
        save_state(execution.directory, state)
    points = _final_points(spec, state["choices"])
    if not state["final_done"] and points:
        phase_spec = final_study(spec)
        search = (
            None,
            {"point": tune.grid_search(points), "seed": tune.grid_search(list(spec.final.seeds))},
            1,
        )
        callback = _callback(execution, phase_spec, "final", None)
        planned = len(points) * len(spec.final.seeds)
        progress = _progress(execution, "final", planned, since, label_keys=list(spec.arms))
        results = _fit(execution, "final", phase_spec, callback, progress, search=search, verbose=verbose)
        live |= {r.metrics.get("trial_id") for r in results if r.metrics}
        close_completed(client, execution, results)
    state["final_done"] = True
    save_state(execution.directory, state)
    close_orphans(client, execution, live)
    client.log_text(execution.parent_run_id, json.dumps(state, indent=2, default=str), ARTIFACT)
    client.set_terminated(execution.parent_run_id, "FINISHED")
    progress_line.mark(execution.directory, "finished")
    summary = summarise(client, execution)
    summary.arms = arm_rows(client, execution, state)
    parent_summary.log_summary(client, execution.experiment_id, execution.parent_run_id, spec)
    return summary


def _confirm(
    execution, i: int, arm: dict, low: ArmChoice, top_k: int, label: str, since: float, verbose: int
):
    """Phase `confirm-<i>`: the arm's top points at full fidelity on the first tuning seed; (the
    arm's choice among them, the trial ids that ran)."""
    spec, objective = execution.spec, execution.spec.objectives[0]
    client = store.client_for(execution.tracking_uri)
    phase_spec = confirm_study(spec, arm)
    top = confirmation.top_points(low, top_k, objective.mode)
    seed = phase_spec.search.seeds[0]
    describe = functools.partial(
        confirmation.describe_confirmation, spec=phase_spec, samples=confirmation.samples(top)
    )
    callback = _callback(execution, phase_spec, "confirm", arm, describe=describe)
    progress = _progress(execution, label, len(top), since)
    search = confirmation.phase_search(top, seed)
    results = _fit(execution, f"confirm-{i}", phase_spec, callback, progress, search=search, verbose=verbose)
    close_completed(client, execution, results)
    choice = confirmation.confirmed_choice(
        low,
        results,
        top=top,
        top_k=top_k,
        seed=seed,
        metric=objective.metric,
        mode=objective.mode,
        fidelity=spec.search.fidelity,
    )
    if choice.confirmation["note"]:
        print(f"[{spec.name}] {label}: {choice.confirmation['note']}", flush=True)
    return choice, {r.metrics.get("trial_id") for r in results if r.metrics}


def _log_rank_transfer(client, parent_run_id: str, key: str, choice: ArmChoice, state: dict) -> None:
    """The parent run's RANK_TRANSFER tag (every confirmed arm so far) and this arm's ρ and n."""
    done = {k: c.get("confirmation") for k, c in state["choices"].items() if c.get("confirmation")}
    done[key] = choice.confirmation
    summary = {
        k: {field: c[field] for field in ("rho", "n", "confirmed", "changed")} for k, c in done.items()
    }
    store.set_tags(client, parent_run_id, {layout.RANK_TRANSFER: json.dumps(summary, sort_keys=True)})
    metrics = parent_summary.rank_transfer_metrics(key, choice.confirmation["rho"], choice.confirmation["n"])
    store.log_metrics(client, parent_run_id, metrics, step=0)


def arm_rows(client, execution, state: dict) -> list[dict]:
    """Per arm: the tuned point, its validation score, and the final runs' val/test means."""
    finals: dict[str, list] = {}
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        tags = run.data.tags
        if tags.get(layout.PHASE) == "final" and tags.get(layout.STATUS) == "FINISHED":
            finals.setdefault(tags.get(layout.ARM), []).append(run.data.metrics)
    rows = []
    for key, choice in state["choices"].items():
        runs = finals.get(key, [])
        row = {"arm": key, "point": choice["point"], "tuning_score": choice["score"], "final_runs": len(runs)}
        if choice.get("budget"):  # a compute budget: what the arm's search spent (tune.budget)
            row["budget"] = budget.describe(choice["budget"])
        for metric in ("val_top1", "test_top1"):
            values = [m[metric] for m in runs if metric in m]
            row[metric] = sum(values) / len(values) if values else None
        rows.append(row)
    return rows
