"""`run_study` / `resume_study`: a StudySpec becomes a Ray Tune experiment tracked in MLflow.

Every execution of a study gets its own folder `storage/<name>/<timestamp>` holding Tune's
experiment state, the Optuna RDB study (`optuna.db`, readable by optuna-dashboard) and
`vitscale-study.json` (the resolved spec, the MLflow parent run, the tracking URI); the file
`storage/<name>/latest` names the newest one, which `study resume NAME` continues. Where a
relative `storage` lives (the working directory, or in a submitted job the cluster's persistent
storage) and the check that every node sees it are `tune.storage`'s.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from ray import tune

from vitscale import storage_errors
from vitscale.errors import UserError
from vitscale.kinds import check_complete
from vitscale.study import StudySpec, count_trials, dump_spec, load_study, spec_hash
from vitscale.tracking import parent_summary, queued, runs_view, store
from vitscale.train.from_mlflow import resolve_spec_teachers
from vitscale.tune import (
    budget,
    cluster,
    cpu_share,
    interrupt,
    jobs,
    optuna_study,
    progress_line,
    signed_storage,
    snapshot_period,
    state_digest,
)
from vitscale.tune import storage as storage_mod
from vitscale.tune.comparison import borrowed_state, save_state
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.storage import LATEST_FILE, STATE_FILE
from vitscale.tune.summary import close_completed, close_orphans, summarise
from vitscale.tune.tuner import build_tuner, trainable_for
from vitscale.validation import error_lines


@dataclass
class StudyExecution:
    """Where one execution of a study lives and how it is tracked."""

    directory: Path
    spec: Any
    tracking_uri: str
    experiment_id: str
    parent_run_id: str
    optuna_storage: str = ""  # the RDB of its Optuna studies (sampler study or comparison arms)
    source: str = ""  # the study file as the user named it: MLflow's Source column of every run

    def save(self) -> None:
        state = {
            "spec": self.spec.model_dump(mode="json"),
            "tracking_uri": self.tracking_uri,
            "experiment_id": self.experiment_id,
            "parent_run_id": self.parent_run_id,
            "optuna_storage": self.optuna_storage,
            "source": self.source,
        }
        storage_mod.write_state(self.directory / STATE_FILE, state)
        storage_mod.write_atomically(self.directory.parent / LATEST_FILE, self.directory.name + "\n")

    @classmethod
    def load(cls, directory: Path) -> StudyExecution:
        path = directory / STATE_FILE
        state = storage_mod.read_state(path)
        try:
            return cls(
                directory=directory,
                spec=StudySpec.model_validate(state["spec"]),
                tracking_uri=state["tracking_uri"],
                experiment_id=state["experiment_id"],
                parent_run_id=state["parent_run_id"],
                optuna_storage=state.get("optuna_storage", ""),
                source=state.get("source", ""),
            )
        except (KeyError, TypeError, ValidationError) as exc:
            why = "; ".join(error_lines(exc, "spec")) if isinstance(exc, ValidationError) else f"no {exc}"
            raise UserError(
                f"{path}: not a complete execution record ({why}); restore it, "
                "or start a new execution with `vitscale study run`"
            ) from None


def _check_cpu_share(spec, address: str | None, allow_autoscale: bool) -> None:
    """Threads per trial x trials at once within every node's CPUs (`tune.cpu_share`); in-process
    Ray within this machine's cores too. An autoscaling cluster's nodes are not known yet."""
    if not allow_autoscale:
        cores = cpu_share.usable_cores() if address is None else None
        cpu_share.check(spec, cluster.node_capacities(), cores)


def _storage_root(spec, storage: str | None) -> Path:
    return storage_mod.resolve(storage or spec.storage)


def _absolute_data_root(spec):
    """Trials run in their own folders (and on other nodes): a relative data root is the driver's."""
    root = spec.trial.data.root
    if root is None or "://" in root or Path(root).is_absolute():
        return spec
    data = spec.trial.data.model_copy(update={"root": str(Path(root).resolve())})
    trial = spec.trial.model_copy(update={"data": data})
    return spec.model_copy(update={"trial": trial})


@storage_errors.as_user_error()  # a full or read-only disk met outside the fit: one line too
def run_study(
    spec,
    *,
    address: str | None = None,
    tracking_uri: str | None = None,
    storage: str | None = None,
    num_cpus: int | None = None,
    allow_autoscale: bool = False,
    verbose: int = 1,
    source: str = "",
    continue_search: bool = False,
):
    """Run every trial of `spec`; return the study's summary (see `tune.summary`). `source`: the
    study file as the user named it (MLflow's Source column). `continue_search`: sample
    `search.num_samples` more points in the newest execution's Optuna study (see tune.optuna_study)."""
    check_complete(spec.kind)  # a kind some layer cannot run fails here, in one line, not mid-study
    # Absolute in the execution record: resuming by folder from another directory finds the same store.
    uri = storage_mod.absolute_sqlite(store.resolve_tracking_uri(tracking_uri, spec.tracking.uri))
    store.check_tracking_uri(uri)
    spec = _absolute_data_root(spec)
    borrowed = borrowed_state(spec, uri)  # tuned_from: the arms' tuned points, read from MLflow now
    study_folder = _storage_root(spec, storage) / spec.name
    started = time.strftime("%Y%m%d-%H%M%S")
    optuna_study.storage_for(spec, study_folder / started, continue_search)  # its refusals, before Ray starts
    cluster.connect(address, num_cpus=num_cpus)
    cluster.preflight(spec.resources.cpu, spec.resources.gpu, allow_autoscale)
    _check_cpu_share(spec, address, allow_autoscale)
    storage_mod.check_shared(study_folder.parent)
    # Before any MLflow run (teachers/ goes in it next); claimed atomically, so a driver started
    # within the same second gets a folder of its own.
    directory = storage_mod.new_execution_folder(study_folder, started)

    # A teacher named by run id, models:/ URI or `best_of` another study is resolved now, once, into
    # the execution folder (every node sees it); the saved spec keeps it for resume.
    spec = resolve_spec_teachers(spec, uri, directory)
    if borrowed:
        save_state(directory, borrowed)
    client = store.client_for(uri)
    experiment_name = spec.tracking.experiment or spec.name
    experiment_id = store.ensure_experiment(
        client, experiment_name, spec.description, replace_description=experiment_name == spec.name
    )
    runs_view.save_view(client, experiment_id, spec)  # the runs table's columns: the key metrics
    spec_yaml = dump_spec(spec)
    parent_run_id = store.create_study_run(
        client,
        experiment_id,
        spec.name,
        spec.kind,
        spec_hash(spec),
        spec_yaml,
        description=spec.description,
        source=source,
    )
    planned = count_trials(spec)
    jobs.tag_parent_run(client, parent_run_id, planned=planned)
    parent_summary.log_study_params(client, parent_run_id, parent_summary.study_params(spec, planned))
    optuna_storage = storage_mod.absolute_sqlite(optuna_study.storage_for(spec, directory, continue_search))
    execution = StudyExecution(directory, spec, uri, experiment_id, parent_run_id, optuna_storage, source)
    execution.save()
    return TUNE_KINDS[spec.kind].run(execution, verbose)


def run_experiment(execution: StudyExecution, verbose: int = 1):
    """A study that is one Tune experiment (train, benchmark): its tuner, fitted and summarised."""
    return _fit_and_summarise(build_tuner(execution, verbose=verbose), execution)


def resume_experiment(execution: StudyExecution, verbose: int = 1):
    """Continue a study that is one Tune experiment from the state in its folder."""
    snapshot_period.apply_for(execution.spec)
    tuner = tune.Tuner.restore(
        str(execution.directory),
        trainable=trainable_for(execution.spec),
        resume_unfinished=True,
        resume_errored=True,
        storage_filesystem=signed_storage.filesystem(),  # verified as read, signed as written
    )
    return _fit_and_summarise(tuner, execution)


def locate_execution(target: str, storage: str | None = None) -> Path:
    """NAME, a study YAML, or an execution folder -> the execution folder to resume."""
    path = Path(target)
    if path.is_dir() and (path / STATE_FILE).is_file():
        return path.resolve()
    if path.is_dir() and (path / LATEST_FILE).is_file():
        return (path / (path / LATEST_FILE).read_text().strip()).resolve()
    if path.suffix in (".yaml", ".yml") and path.is_file():
        spec = load_study(path)
        name, root = spec.name, _storage_root(spec, storage)
    else:
        name, root = target, storage_mod.resolve(storage or "ray_results")
    latest = root / name / LATEST_FILE
    if not latest.is_file():
        raise UserError(
            f"{target}: no execution of this study under {root / name}; run it first with "
            "`vitscale study run FILE` (or pass --storage where it ran)"
        )
    return (root / name / latest.read_text().strip()).resolve()


@storage_errors.as_user_error()
def resume_study(
    target: str,
    *,
    address: str | None = None,
    storage: str | None = None,
    num_cpus: int | None = None,
    allow_autoscale: bool = False,
    verbose: int = 1,
):
    """Continue an execution whose driver died: finish exactly its planned trials."""
    directory = locate_execution(target, storage)
    execution = StudyExecution.load(directory)
    check_complete(execution.spec.kind)
    state_digest.verify_folder(directory)  # before Tune unpickles anything in it
    store.check_tracking_uri(execution.tracking_uri)
    optuna_study.check_resumable(directory, execution.optuna_storage, execution.spec)
    cluster.connect(address, num_cpus=num_cpus)
    cluster.preflight(execution.spec.resources.cpu, execution.spec.resources.gpu, allow_autoscale)
    _check_cpu_share(execution.spec, address, allow_autoscale)
    storage_mod.check_shared(directory.parent.parent)
    client = store.client_for(execution.tracking_uri)
    finished_at = parent_summary.parent_end_time(client, execution.parent_run_id)  # None: not finished
    client.update_run(execution.parent_run_id, status="RUNNING")
    jobs.tag_parent_run(client, execution.parent_run_id)
    params = parent_summary.study_params(execution.spec, count_trials(execution.spec))
    parent_summary.log_study_params(client, execution.parent_run_id, params)
    summary = TUNE_KINDS[execution.spec.kind].resume(execution, verbose)
    # Nothing was left to run: the parent keeps the end time of the execution that finished it.
    parent_summary.keep_end_time(client, execution.experiment_id, execution.parent_run_id, finished_at)
    return summary


def _fit_and_summarise(tuner, execution: StudyExecution):
    # MLflow writes go through the execution's write queue (tracking.queue); on resume, first send
    # what a driver killed during a tracking outage left queued.
    queued.open_pending(execution.directory, execution.tracking_uri)
    results, tracking = interrupt.fit(tuner, execution, flush=queued.close_all)
    if tracking.pending:
        raise UserError(
            f"{tracking.line()}; the tracking server {execution.tracking_uri} is still unreachable"
        )
    client = store.client_for(execution.tracking_uri)
    close_completed(client, execution, results)
    close_orphans(client, execution, {r.metrics.get("trial_id") for r in results if r.metrics})
    budget.report_spent(client, execution, execution.spec, results)
    summary = summarise(client, execution)
    summary.tracking = tracking.line()
    parent_summary.log_summary(client, execution.experiment_id, execution.parent_run_id, execution.spec)
    progress_line.mark(execution.directory, "finished")
    return summary
