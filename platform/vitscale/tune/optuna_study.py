"""The Optuna study behind a sampler study: its name, its RDB, continuing it, start points.

- Name: the vitscale study name; a comparison's arm (tuned in its phase folder `tune-<i>`),
  `<study>/<arm>` with the arm's display name (`tuned-quickstart/ssog · ode`), so the arms'
  studies tell apart in optuna-dashboard, which lists them side by side: every arm's study is in
  the execution's one storage. Storage: `search.optuna_storage`, else `optuna.db` (SQLite) in the
  execution's folder, beside Tune's state; `vitscale-study.json` records it. A comparison begun
  before its arms shared one storage recorded none and keeps each arm in `tune-<i>/optuna.db`: it
  resumes so, and `vitscale dashboard` opens one arm at a time.
- Metric names: the objectives' metrics (`set_metric_names`), so the dashboard plots `val_top1`
  rather than "Objective 0".
- `dashboard_studies`: the Optuna studies of an execution folder, for `vitscale dashboard`.
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

import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from vitscale.errors import UserError
from vitscale.sqlite_files import check_sqlite
from vitscale.study import StudySpec
from vitscale.study.comparison import arm_list
from vitscale.study.distributions import label
from vitscale.study.population import is_population
from vitscale.tracking import layout
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.storage import LATEST_FILE, STATE_FILE, read_state

DB_FILE = "optuna.db"
DASHBOARD_STUDY_PAGE = "dashboard/studies"  # optuna-dashboard's page of one study: <this>/<study id>
TUNE_PHASE = re.compile(r"tune-(\d+)")  # a comparison arm's tuning phase folder (tune.comparison)


def study_name(study: str, arm: Mapping[str, Any] | None = None) -> str:
    """The Optuna study's name: the vitscale study's, or `<study>/<arm display>` for an arm."""
    return f"{study}/{layout.arm_display(layout.arm_key(arm))}" if arm else study


def uses_optuna(spec) -> bool:
    """Whether this execution has an Optuna study of its own, as its kind says (`TuneKind.uses_optuna`)."""
    return TUNE_KINDS[spec.kind].uses_optuna(spec)


def samples_space(spec) -> bool:
    """A study that searches its own space does with Optuna unless it is a grid, or a population
    that PBT / PB2 evolves (drawn up front: `tune.arm_population`)."""
    return spec.search.algorithm != "grid" and not is_population(spec)


def no_optuna_study(spec) -> bool:
    """A benchmark sweeps a grid; a comparison's arms each keep theirs in their phase folder."""
    return False


def arms_sample(spec) -> bool:
    """A comparison whose arms are tuned by a sampler: one Optuna study per arm, in one storage
    (not a population PBT / PB2 evolves)."""
    return TUNE_KINDS[spec.kind].optuna_per_arm and samples_space(spec)


def study_names(spec) -> list[str]:
    """The Optuna studies an execution of `spec` makes: the study's, or one per arm."""
    if arms_sample(spec):
        return [study_name(spec.name, arm) for arm in arm_list(spec)]
    return [spec.name] if uses_optuna(spec) else []


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
    """The RDB URL of this execution's Optuna studies: a sampler study's, or all the arms' of a
    comparison tuned by a sampler; '' for grid and benchmark studies."""
    if not uses_optuna(spec):
        if continue_search:
            raise UserError(
                "--continue: only a sampler study (kind: train, search.algorithm other than grid) "
                "has a search to continue"
            )
        if not arms_sample(spec):
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
    if spec.search.optuna_storage:
        for name in study_names(spec):
            if completed_trials(url, name) is not None:
                again = "" if arms_sample(spec) else "add --continue to extend it, or "
                raise UserError(
                    f"search.optuna_storage: {url} already holds an Optuna study named {name}; "
                    f"{again}delete it with `optuna delete-study`"
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


DAMAGED_FIX = (
    "restore it from a copy, or start a new execution with `vitscale study run` (its search starts over)"
)


def check_resumable(directory: Path, url: str, spec) -> None:
    """Before a resume: every Optuna DB of the execution reads as SQLite, and its storage still
    holds the studies searched so far (an emptied or replaced file does not): a sampler study's
    own, a comparison's for each arm whose tuning phase began (`tune-<i>`). Executions begun
    before the arms shared one storage keep theirs in `tune-<i>/optuna.db` and resume so."""
    for db in sorted(directory.glob(f"tune-*/{DB_FILE}")):
        check_sqlite(f"sqlite:///{db}", "optuna.db", DAMAGED_FIX)
    if not url:
        return
    check_sqlite(url, "optuna.db", DAMAGED_FIX)
    if arms_sample(spec):
        names = [n for i, n in enumerate(study_names(spec)) if (directory / f"tune-{i}").is_dir()]
    else:
        names = [spec.name]
    for name in names:
        if completed_trials(url, name) is None:
            raise UserError(
                f"optuna.db: {url} holds no Optuna study {name!r} (emptied or replaced?), so the "
                f"search cannot go on; {DAMAGED_FIX}"
            )


def prepare(spec, url: str, name: str | None = None) -> int:
    """Create the Optuna study `name` (default: the study's; enqueueing start points, naming its
    metrics) or find it; the finished trials it holds."""
    import optuna

    check_sqlite(url, "optuna.db", DAMAGED_FIX)
    name = name or spec.name
    done = completed_trials(url, name)
    if done is not None:
        return done
    directions = ["minimize" if o.mode == "min" else "maximize" for o in spec.objectives]
    study = optuna.create_study(storage=url, study_name=name, directions=directions)
    with warnings.catch_warnings():  # experimental since Optuna 3.2, and what the dashboard reads
        warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
        study.set_metric_names([o.metric for o in spec.objectives])
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
            if param.distribution.listed:
                if label(value) not in [label(v) for v in param.values()]:
                    raise UserError(f"{where}: {value!r} is not one of its values {param.values()}")
            else:
                low, high = param.bounds()
                if not isinstance(value, int | float) or not low <= value <= high:
                    raise UserError(f"{where}: {value!r} is outside [{low}, {high}]")
            params[key] = label(value)
        points.append(params)
    return points


@dataclass
class DashboardStudy:
    """One Optuna study optuna-dashboard can open: whose it is, its RDB, the folder holding it."""

    label: str  # the study's name, or a comparison arm's display name
    url: str
    folder: str = ""  # a comparison's phase folder (tune-<i>); "" for the execution's own study
    key: str = ""  # a comparison arm's ARM tag
    page: str = ""  # in a storage of several studies: the study's page, `dashboard/studies/<id>`


def dashboard_studies(directory: Path) -> list[DashboardStudy]:
    """The Optuna studies of an execution folder (or of one comparison phase folder in it): a
    sampler study's own, or one per comparison arm that has begun tuning, in arm order — all in
    the execution's one storage, or (executions begun before that) each in its phase folder's
    `optuna.db`. Empty for grid and benchmark studies (nothing was sampled)."""
    if not (directory / STATE_FILE).is_file() and (directory.parent / STATE_FILE).is_file():
        return [s for s in dashboard_studies(directory.parent) if s.folder == directory.name]
    state = read_state(directory / STATE_FILE, default={})
    spec = state.get("spec")
    name = (spec.get("name") if isinstance(spec, dict) else None) or directory.parent.name
    url = execution_storage(directory)
    arms = _arms(state)
    if url and arms:
        import optuna

        storage = optuna.storages.RDBStorage(url)
        stored = set(optuna.get_all_study_names(storage))
        found = []
        for i, arm in enumerate(arms):
            if study_name(name, arm) not in stored:
                continue  # its tuning has not begun
            key, page = layout.arm_key(arm), storage.get_study_id_from_name(study_name(name, arm))
            found.append(
                DashboardStudy(
                    layout.arm_display(key), url, f"tune-{i}", key, f"{DASHBOARD_STUDY_PAGE}/{page}"
                )
            )
        return found
    if url:
        return [DashboardStudy(name, url)]
    found = []
    for db in sorted(directory.glob(f"tune-*/{DB_FILE}"), key=lambda p: _phase_index(p.parent.name)):
        i = _phase_index(db.parent.name)
        key = layout.arm_key(arms[i]) if i < len(arms) else ""
        shown = layout.arm_display(key) if key else db.parent.name
        found.append(DashboardStudy(shown, f"sqlite:///{db}", db.parent.name, key))
    return found


def _phase_index(folder: str) -> int:
    match = TUNE_PHASE.fullmatch(folder)
    return int(match.group(1)) if match else 1 << 30


def _arms(state: dict) -> list[dict]:
    """The comparison's arms in phase order, from the execution record (none if it cannot be read)."""
    try:
        spec = StudySpec.model_validate(state.get("spec") or {})
    except ValidationError:
        return []
    return arm_list(spec) if spec.arms else []


def pick_arm(studies: list[DashboardStudy], wanted: str) -> DashboardStudy | None:
    """The study of the arm `wanted` names: its display name (any separator: 'ssog · ode',
    'ssog/ode', 'ssog ode'), its ARM tag, or its phase folder (tune-1)."""
    words = _words(wanted)
    for study in studies:
        if wanted in (study.label, study.key, study.folder) or words == _words(study.label):
            return study
    return None


def _words(text: str) -> list[str]:
    return [w for w in re.split(r"[\s·/,|]+", text.strip().lower()) if w]
