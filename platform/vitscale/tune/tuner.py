"""Spec -> `tune.Tuner`: search (grid or an Optuna sampler), scheduler, resources, storage; the
trial function, its description and the search are the study kind's (`tune.kinds.TuneKind`)."""

from __future__ import annotations

import functools

from ray import tune
from ray.tune.search.optuna import OptunaSearch

from vitscale.study import (
    config_key,
    count_trials,
    describe_point,
    grid_points,
    resolve_trial,
    run_params,
    run_trial,
    suggest_point,
)
from vitscale.tracking.tune_callback import MlflowStudyCallback, TrialDescription
from vitscale.tracking.tune_loggers import tune_logger_callbacks
from vitscale.tracking.wandb import wandb_callbacks
from vitscale.tune import (  # noqa: F401 (arm_asha, pb2, pbt: their schedulers register on import)
    arm_asha,
    optuna_study,
    pb2,
    pbt,
    signed_storage,
    snapshot_period,
)
from vitscale.tune.arm_population import INITIAL
from vitscale.tune.budget import budget_of
from vitscale.tune.execution_modes import execution_mode
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.progress import ProgressCallback
from vitscale.tune.replicates import ReplicatedSearcher
from vitscale.tune.resumable_snapshot import ResumableSnapshot
from vitscale.tune.samplers import SAMPLERS
from vitscale.tune.scheduler_registry import scheduler_kind

CHECKPOINTS_KEPT = 4  # per trial; see RunConfig below
BENCH_COLUMNS = ["mixer", "regime", "resolution", "attention_backend"]  # a benchmark point's keys


def trainable_for(spec):
    """The kind's trial function (`TuneKind.trial`) with its resources, in the trial's execution
    mode (`tune.execution_modes`: one process, or Ray Train workers when `resources.workers` > 1)."""
    return execution_mode(spec).trainable(spec, TUNE_KINDS[spec.kind].trial)


def describe_trial(config: dict, spec) -> TrialDescription:
    """Name, params and replicate group of a trial, for its MLflow child run, as its kind
    describes it (`TuneKind.describe`)."""
    return TUNE_KINDS[spec.kind].describe(config, spec)


def describe_train_trial(config: dict, spec) -> TrialDescription:
    """A trial that trains: the trial as the trainable runs it (`run_trial`), the active sections
    only (`run_params`). The replicate key hashes the trial as resolved before (threads and unused
    sections included), so runs of one configuration logged before and after keep one group.
    A population member is described as it was drawn (`INITIAL`): its values change as it trains."""
    point, seed = config.get(INITIAL) or config["point"], config["seed"]
    sample = config.get("sample") if spec.search.algorithm != "grid" else None
    return TrialDescription(
        run_name=describe_point(point, seed, sample),
        params=run_params(run_trial(spec, point, seed)),
        config_key=config_key(resolve_trial(spec, point, seed)),
    )


def _define_by_run(trial, spec):
    """Optuna define-by-run space honouring `when:`; the point travels whole in the config."""
    return {"point": suggest_point(trial, spec)}


def _scheduler(spec):
    """FIFO, or ASHA / HyperBand / median stopping within each arm (mixer x regime): see
    `tune.arm_asha`; or PBT / PB2 within each arm (`tune.arm_population`): the registered
    entry of `scheduler.type` (`tune.scheduler_registry`)."""
    objective = spec.objectives[0]
    epochs = spec.trial.resolved().train.epochs if spec.scheduler.type != "fifo" else 0
    return scheduler_kind(spec).build(spec, objective.metric, objective.mode, epochs)


def _search(spec, directory, storage_url: str = "", parent_run_id: str = "", optuna_name: str = ""):
    """(search_alg, param_space, num_samples) as the study's kind searches (`TuneKind.search`)."""
    return TUNE_KINDS[spec.kind].search(spec, directory, storage_url, parent_run_id, optuna_name)


def every_point_search(
    spec, directory=None, storage_url: str = "", parent_run_id: str = "", optuna_name: str = ""
):
    """Every grid point (a benchmark: every configuration) x every seed, once."""
    points = grid_points(spec)
    return None, {"point": tune.grid_search(points), "seed": tune.grid_search(list(spec.search.seeds))}, 1


def space_search(spec, directory, storage_url: str = "", parent_run_id: str = "", optuna_name: str = ""):
    """A searched space: its grid, or its sampler. Samplers use the Optuna study `optuna_name`
    (default: the vitscale study's name; a comparison arm's is `<study>/<arm>`) in `storage_url`
    (see `tune.optuna_study`). A population-based scheduler evolves a population drawn up front
    in place of a searcher (`SchedulerKind.population`)."""
    population = scheduler_kind(spec).population
    if population is not None:
        return population(spec)
    if spec.search.algorithm == "grid":
        return every_point_search(spec)
    metrics = [o.metric for o in spec.objectives]
    modes = [o.mode for o in spec.objectives]
    storage_url = storage_url or spec.search.optuna_storage or f"sqlite:///{directory / optuna_study.DB_FILE}"
    import optuna

    optuna_name = optuna_name or spec.name
    done = optuna_study.prepare(spec, storage_url, optuna_name)
    seed = spec.search.sampler_seed
    if seed is not None and done:
        seed += done  # a continued search: new draws, not the first execution's again
    concurrent = spec.search.max_concurrent_trials != 1
    optuna_search = OptunaSearch(
        space=functools.partial(_define_by_run, spec=spec),
        metric=metrics[0] if len(metrics) == 1 else metrics,
        mode=modes[0] if len(modes) == 1 else modes,
        sampler=SAMPLERS[spec.search.algorithm](seed, len(metrics), concurrent=concurrent),
        study_name=optuna_name,
        storage=optuna.storages.RDBStorage(storage_url),
    )
    seeds = list(spec.search.seeds)
    searcher = ReplicatedSearcher(
        optuna_search, seeds, metrics, modes, parent_run_id=parent_run_id, budget=budget_of(spec)
    )
    return searcher, {}, spec.search.num_samples * len(seeds)


def _reporter(spec) -> tune.CLIReporter:
    """Ray Tune's status table (`--verbose` only: the progress line says where a study stands),
    showing the objectives, at most every 15 s."""
    columns = {"epoch": "epoch", **{o.metric: o.metric for o in spec.objectives}}
    parameters = {f"point/{name}": name.split(".")[-1] for name in TUNE_KINDS[spec.kind].reported_keys(spec)}
    if len(spec.search.seeds) > 1:
        parameters["seed"] = "seed"
    return tune.CLIReporter(
        metric_columns=columns, parameter_columns=parameters, max_report_frequency=15, max_progress_rows=30
    )


def space_keys(spec) -> list[str]:
    """A searched study's status columns: its space's keys."""
    return list(spec.space)


def benchmark_keys(spec) -> list[str]:
    """A benchmark's status columns: a variant key only where the sweep lists several values of it."""
    return [*BENCH_COLUMNS, *(spec.benchmark.varying() if spec.benchmark else ())]


def build_tuner(
    execution, verbose: int = 0, *, callback=None, search=None, progress=None, optuna_name: str = ""
) -> tune.Tuner:
    """The study's Tuner. Comparison phases pass their own callback (phase and arm tags), search
    (the final runs' grid) and progress line (naming the phase); the experiment lives in
    `execution.directory`. `verbose` 1 adds Ray's status table to the progress line."""
    spec = execution.spec
    storage_url = getattr(execution, "optuna_storage", "")
    search_alg, param_space, num_samples = search or _search(
        spec, execution.directory, storage_url, execution.parent_run_id, optuna_name
    )
    callback = callback or MlflowStudyCallback(
        tracking_uri=execution.tracking_uri,
        experiment_id=execution.experiment_id,
        parent_run_id=execution.parent_run_id,
        study=spec.name,
        kind=spec.kind,
        describe=functools.partial(describe_trial, spec=spec),
        checkpoints=spec.tracking.checkpoints,
        objectives=[(o.metric, o.mode) for o in spec.objectives],
        source=getattr(execution, "source", ""),
    )
    kind = TUNE_KINDS[spec.kind]
    planned = None if budget_of(spec) else count_trials(spec)  # a compute budget: known at its end
    progress = progress or ProgressCallback(
        spec.name, planned, kind.best_of(spec), record=execution.directory
    )
    snapshot_period.apply_for(spec)  # Tune's experiment snapshot: rarer for larger studies

    return tune.Tuner(
        trainable_for(spec),
        param_space=param_space,
        tune_config=tune.TuneConfig(
            search_alg=search_alg,
            scheduler=_scheduler(spec),
            num_samples=num_samples,
            max_concurrent_trials=execution_mode(spec).concurrency(spec),
            # One worker runs trial after trial (imports and data loaded once; tune.worker_cache
            # resets the rest), unless the kind's trials need a fresh process each (`reuse_workers`)
            # or the mode's trial owns workers that must end with it (Ray Train).
            reuse_actors=kind.reuse_workers and execution_mode(spec).reuse_actors,
            trial_name_creator=lambda trial: trial.trial_id,
            trial_dirname_creator=lambda trial: trial.trial_id,
        ),
        run_config=tune.RunConfig(
            name=execution.directory.name,
            storage_path=str(execution.directory.parent),
            storage_filesystem=signed_storage.filesystem(),  # state files signed as Tune writes them
            failure_config=tune.FailureConfig(max_failures=spec.failure.max_failures),
            # The experiment snapshot a resume reads is taken every TUNE_GLOBAL_CHECKPOINT_S, so it
            # can name a checkpoint a few epochs old: keep that many, or a driver killed between two
            # snapshots leaves a trial whose checkpoint "does not exist on storage anymore". Tune
            # forces a snapshot once a trial saved num_to_keep since the last (tune.snapshot_period).
            checkpoint_config=tune.CheckpointConfig(
                num_to_keep=CHECKPOINTS_KEPT + scheduler_kind(spec).extra_checkpoints(spec)
            ),
            # Each trial's stdout/stderr in its folder (synced to storage with every checkpoint),
            # logged to its child run at completion (tracking.trial_artifacts).
            log_to_file=True,
            sync_config=tune.SyncConfig(sync_artifacts=True),
            callbacks=[
                ResumableSnapshot(),  # a driver killed at any moment resumes (Ray repairs)
                callback,
                progress,
                *wandb_callbacks(spec, execution.directory),
                *tune_logger_callbacks(spec),
                *execution_mode(spec).driver_callbacks(),
            ],
            verbose=verbose,
            progress_reporter=_reporter(spec),
        ),
    )
