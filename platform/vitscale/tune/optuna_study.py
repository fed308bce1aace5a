"""The Optuna study behind a sampler study: its name, its RDB, continuing it, start points.

- Name: the vitscale study name. Storage: `search.optuna_storage`, else `optuna.db` (SQLite) in
  the execution's folder, beside Tune's state; `vitscale-study.json` records it.
- `study run FILE --continue`: the new execution uses the newest execution's Optuna study (same
  RDB, same name) and samples `search.num_samples` more points. Every earlier trial is in that
  study, and so is the samplers' state that Optuna keeps there (TPE, NSGA-II and CMA-ES read the
  study's trials and system attributes; QMC its sample index). Only the random generator is not
  stored: the continued sampler is seeded with `sampler_seed + trials so far`, so it never
  replays the draws of the first execution.
- `search.start_points`: configurations enqueued (Optuna `enqueue_trial`) when the study is
  created, so they are the first points evaluated; a continued study does not enqueue them again.
- Each Optuna trial carries user attributes (see tune.replicates): `seeds`, `tune_trial_ids`,
  `mlflow_parent_run_id`, `mlflow_run_ids`, `completed_trials_seen` (how many finished trials
  the sampler could learn from when it drew this point).
"""

from __future__ import annotations

from pathlib import Path

from vitscale.errors import UserError
from vitscale.study.distributions import label
from vitscale.tune.storage import LATEST_FILE, STATE_FILE, read_state

DB_FILE = "optuna.db"


def uses_optuna(spec) -> bool:
    return spec.kind == "train" and spec.search.algorithm != "grid"


def _newest_execution(spec, directory: Path) -> Path | None:
    latest = directory.parent / LATEST_FILE
    if not latest.is_file():
        return None
    previous = directory.parent / latest.read_text().strip()
    return previous if (previous / STATE_FILE).is_file() else None


def execution_storage(directory: Path) -> str:
    """The RDB URL of the Optuna study an execution folder recorded ('' when it has none)."""
    state_file = directory / STATE_FILE
    state = read_state(state_file, default={})
    url = state.get("optuna_storage") or ""
    if not url and (directory / DB_FILE).is_file():
        url = f"sqlite:///{directory / DB_FILE}"
    return url


def storage_for(spec, directory: Path, continue_search: bool) -> str:
    """The RDB URL of this execution's Optuna study ('' for grid, benchmark and comparison)."""
    if not uses_optuna(spec):
        if continue_search:
            raise UserError(
                "--continue: only a sampler study (kind: train, search.algorithm other than grid) "
                "has a search to continue"
            )
        return ""
    if continue_search:
        previous = _newest_execution(spec, directory)
        url = execution_storage(previous) if previous else ""
        if not url:
            raise UserError(
                f"--continue: no earlier execution of {spec.name} with an Optuna study under "
                f"{directory.parent}; run it once without --continue"
            )
        if completed_trials(url, spec.name) is None:
            raise UserError(f"--continue: {url} holds no Optuna study named {spec.name}")
        return url
    url = spec.search.optuna_storage or f"sqlite:///{directory / DB_FILE}"
    if spec.search.optuna_storage and completed_trials(url, spec.name) is not None:
        raise UserError(
            f"search.optuna_storage: {url} already holds an Optuna study named {spec.name}; "
            "add --continue to extend it, or delete it with `optuna delete-study`"
        )
    return url


def completed_trials(url: str, name: str) -> int | None:
    """Finished trials of the study `name` in `url`; None when there is no such study."""
    import optuna

    try:
        study = optuna.load_study(study_name=name, storage=url)
    except KeyError:
        return None
    return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))


def prepare(spec, url: str) -> int:
    """Create the study (enqueueing start points) or find it; the finished trials it holds."""
    import optuna

    done = completed_trials(url, spec.name)
    if done is not None:
        return done
    directions = ["minimize" if o.mode == "min" else "maximize" for o in spec.objectives]
    study = optuna.create_study(storage=url, study_name=spec.name, directions=directions)
    study.set_user_attr("vitscale_study", spec.name)
    if spec.description:
        study.set_user_attr("description", spec.description)
    for point in start_points(spec):
        study.enqueue_trial(point, skip_if_exists=True)
    return 0


def start_points(spec) -> list[dict]:
    """`search.start_points` as Optuna parameters (choice values as the labels the space suggests)."""
    points = []
    for i, point in enumerate(spec.search.start_points or ()):
        params = {}
        for key, value in point.items():
            param = spec.space.get(key)
            where = f"search.start_points[{i}].{key}"
            if param is None:
                raise UserError(f"{where}: not a key of space ({', '.join(spec.space) or 'empty'})")
            if param.kind in ("choice", "grid"):
                if label(value) not in [label(v) for v in param.values()]:
                    raise UserError(f"{where}: {value!r} is not one of its values {param.values()}")
            else:
                low, high = param.int_range if param.kind == "int" else param.bounds()
                if not isinstance(value, int | float) or not low <= value <= high:
                    raise UserError(f"{where}: {value!r} is outside [{low}, {high}]")
            params[key] = label(value)
        points.append(params)
    return points
