"""What MLflow runs logged, read back: a distillation teacher's source made local, the best run of
a study (`best_of`), `load_from_mlflow` (the model a run logged, ready to use) and
`logged_trial` (the trial a run logged and the run it came from, for `vitscale train --from-run`).

`train.distill.teacher` names a checkpoint (a `checkpoint.pt` file or the folder holding it), an
MLflow run (its id or `runs:/ID`: the run's `checkpoint/checkpoint.pt` artifact, as `vitscale
train` logs it and as `tracking.checkpoints` logs a study's best trials), a registered model
(`models:/NAME/VERSION` or `models:/NAME@ALIAS`: its source run's checkpoint) or, in a study,
`{best_of: STUDY, where: {...}}`. Everything that needs MLflow happens once, on the driver
(`resolve_source`, `resolve_best_of`), and ends in a local checkpoint file: trials only ever read
a path (inside the execution folder for studies, which every node sees; see `train.teacher`).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from vitscale.dotted import nested
from vitscale.errors import TeacherMismatch, UserError
from vitscale.models import ModelConfig, build
from vitscale.tracking import layout, store
from vitscale.tracking.layout import DEFAULT_TRACKING_URI
from vitscale.tracking.trial_artifacts import CHECKPOINT_ARTIFACT
from vitscale.train.checkpoint import CHECKPOINT_FILE, load_checkpoint
from vitscale.train.config import TeacherRef

TEACHER_CONFIG_FILE = "teacher_model.json"  # the model config of a checkpoint fetched from MLflow
RUN_ID_PATTERN = re.compile(r"^[0-9a-f]{32}$")


def resolve_source(source: str, tracking_uri: str | None, download_dir: Path) -> tuple[Path, str | None]:
    """A teacher string -> (local checkpoint file, MLflow run id or None)."""
    path = Path(source).expanduser()
    if path.is_dir():
        path = path / CHECKPOINT_FILE
    if path.is_file():
        return path.resolve(), None
    run_id = None
    if source.startswith("runs:/"):
        run_id = source.removeprefix("runs:/").split("/")[0]
    elif RUN_ID_PATTERN.match(source):
        run_id = source
    elif source.startswith("models:/"):
        run_id = _registered_model_run(source, tracking_uri)
    if run_id is None:
        raise TeacherMismatch(
            f"train.distill.teacher: {source!r} is neither a checkpoint file or folder, an MLflow run id "
            "(or runs:/ID) nor a models:/NAME/VERSION URI"
        )
    if tracking_uri is None:
        raise TeacherMismatch(
            f"train.distill.teacher: {source!r} names an MLflow run but no tracking URI is set"
        )
    return download_checkpoint(_client(tracking_uri), run_id, download_dir / run_id), run_id


def _client(tracking_uri: str):
    store.check_tracking_uri(tracking_uri)
    return store.client_for(tracking_uri)


def _registered_model_run(uri: str, tracking_uri: str | None) -> str:
    name, _, rest = uri.removeprefix("models:/").partition("/")
    alias = None
    if "@" in name:
        name, alias = name.split("@", 1)
    client = _client(tracking_uri or DEFAULT_TRACKING_URI)
    try:
        version = (
            client.get_model_version_by_alias(name, alias) if alias else client.get_model_version(name, rest)
        )
    except store.mlflow_exception() as exc:
        raise TeacherMismatch(f"train.distill.teacher: {uri}: {str(exc).splitlines()[0]}") from None
    return version.run_id


def download_checkpoint(
    client,
    run_id: str,
    destination: Path,
    key: str = "train.distill.teacher",
    error: type[UserError] = TeacherMismatch,
) -> Path:
    """The run's `checkpoint/checkpoint.pt` artifact, downloaded (once), with its model config.
    A run that cannot be read or has no checkpoint raises `error`, its line naming `key`."""
    target = destination / CHECKPOINT_ARTIFACT / CHECKPOINT_FILE
    if target.is_file():
        return target
    try:
        run = client.get_run(run_id)
        names = [a.path for a in client.list_artifacts(run_id, CHECKPOINT_ARTIFACT)]
    except store.mlflow_exception() as exc:
        raise error(f"{key}: run {run_id}: {str(exc).splitlines()[0]}") from None
    if f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}" not in names:
        raise error(
            f"{key}: run {run_id} has no logged checkpoint ({CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}); "
            "train it with `vitscale train --checkpoint-dir DIR` (which logs one) or run its study with "
            "tracking.checkpoints: all (best: the best configurations only)"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=destination) as tmp:
        with store.quiet_artifact_progress():
            local = client.download_artifacts(run_id, f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}", tmp)
        shutil.copyfile(local, target.with_suffix(".tmp"))
    target.with_suffix(".tmp").replace(target)
    model = section_params(run.data.params, "model")
    (target.parent / TEACHER_CONFIG_FILE).write_text(json.dumps(model, indent=2))
    return target


def parse_param(value: str) -> Any:
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return None if parsed == "None" else parsed


def section_params(params: dict[str, str], section: str) -> dict[str, Any]:
    """One section of a run's params, nested and parsed: section_params(params, "model") ->
    {'mixer': 'ssog', 'ssog': {'num_gaussians': 4}, ...} (the model a run logged, `model.*`)."""
    prefix = section + "."
    return nested({k.removeprefix(prefix): parse_param(v) for k, v in params.items() if k.startswith(prefix)})


# Keys added to the trial after runs were logged, with the value those runs ran with.
AS_BEFORE = {"model.init": "timm"}


@dataclass(frozen=True)
class LoggedTrial:
    """A run's trial, as `vitscale train --from-run` reruns it, and what the rerun is named,
    filed and compared by: the source run's id, name, experiment and test top-1."""

    trial: dict[str, Any]  # `model`, `data`, `train`: the mapping a TrialConfig validates
    run_id: str
    run_name: str
    experiment: str  # the source's experiment's name: the rerun goes beside it
    test_top1: float | None  # None: the source did not finish (or is older than test_top1)


def logged_trial(run_id: str, tracking_uri: str) -> LoggedTrial:
    """The trial a run logged (`model.*`, `data.*`, `train.*`) and where it came from. A study
    trial logs every value it ran with (threads, recipe, resolved defaults), so the rerun
    reproduces its metrics on the same device; a value left unset where unset is the default
    (`train.config.logged_params`) is not logged, and left out here it is that default again."""
    key = "--from-run"
    if not RUN_ID_PATTERN.match(run_id):
        raise UserError(
            f"{key}: {run_id!r} is not an MLflow run id (32 hex digits; `vitscale ui` lists them)"
        )
    client = _client(tracking_uri)
    try:
        run = client.get_run(run_id)
        experiment = client.get_experiment(run.info.experiment_id).name
    except store.mlflow_exception():
        raise UserError(
            f"{key}: no MLflow run {run_id} at {tracking_uri}; check the id or pass the store it was "
            "logged to with --tracking-uri"
        ) from None
    params = run.data.params
    trial = {section: section_params(params, section) for section in ("model", "data", "train")}
    if not trial["model"] or not trial["train"]:
        raise UserError(
            f"{key}: run {run_id} logged no trial (model.* and train.* params): pick a trial's run, "
            "not a study's parent run or a benchmark"
        )
    for path, value in AS_BEFORE.items():  # keys added since the run: the value it ran with
        section, name = path.split(".", 1)
        trial[section].setdefault(name, value)
    return LoggedTrial(
        trial=trial,
        run_id=run_id,
        run_name=run.info.run_name or "",
        experiment=experiment,
        test_top1=run.data.metrics.get("test_top1"),
    )


def trial_from_run(run_id: str, tracking_uri: str) -> dict[str, Any]:
    """The trial a run logged, as the mapping a TrialConfig validates (`logged_trial`'s trial)."""
    return logged_trial(run_id, tracking_uri).trial


def resolve_best_of(ref: TeacherRef, tracking_uri: str, download_dir: Path) -> TeacherRef:
    """The best finished trial (final val_top1; test is never read) of study `ref.best_of` whose
    params match `ref.where`, one per combination of the `same` keys' values, downloaded."""
    client = _client(tracking_uri)
    experiment = client.get_experiment_by_name(ref.best_of)
    if experiment is None:
        raise UserError(
            f"train.distill.teacher.best_of: no MLflow experiment {ref.best_of!r} at {tracking_uri}; "
            "run the teacher study first (or fix the name)"
        )
    runs = client.search_runs(
        [experiment.experiment_id],
        filter_string=f"tags.`{layout.ROLE}` = 'trial' and tags.`{layout.STATUS}` = 'FINISHED'",
        max_results=5000,
    )
    fixed = {k: v for k, v in ref.where.items() if k not in ref.same_keys()}
    best: dict[str, tuple[float, str]] = {}
    for run in runs:
        params, metrics, tags = run.data.params, run.data.metrics, run.data.tags
        if tags.get(layout.DID_NOT_TRAIN) == "true" or "val_top1" not in metrics:
            continue
        if any(k not in params or parse_param(params[k]) != v for k, v in fixed.items()):
            continue
        key = json.dumps([parse_param(params.get(k, "None")) for k in ref.same_keys()])
        if key not in best or metrics["val_top1"] > best[key][0]:
            best[key] = (metrics["val_top1"], run.info.run_id)
    if not best:
        raise UserError(
            f"train.distill.teacher.best_of: study {ref.best_of!r} has no finished trial with "
            f"{ref.where or 'any params'}; run it first or loosen `where`"
        )
    resolved = {}
    for key, (_, run_id) in sorted(best.items()):
        path = download_checkpoint(client, run_id, download_dir / run_id)
        resolved[key] = {"path": str(path.resolve()), "run_id": run_id}
    return ref.model_copy(update={"resolved": resolved})


def resolve_spec_teachers(spec, tracking_uri: str, directory: Path):
    """A study's base trial with its teacher made local (at study start, on the driver): a
    `best_of` reference gets its table of resolved runs, a run id or models:/ URI its downloaded
    checkpoint, in `directory/teachers/<run id>/`. The spec saved with the execution keeps them,
    so a resumed study uses the same teachers."""
    distill = spec.trial.train.distill
    if distill is None or distill.teacher is None:
        return spec
    teachers = directory / "teachers"
    if isinstance(distill.teacher, TeacherRef):
        if distill.teacher.resolved is not None:
            return spec
        distill = distill.model_copy(
            update={"teacher": resolve_best_of(distill.teacher, tracking_uri, teachers)}
        )
    else:
        path, run_id = resolve_source(distill.teacher, tracking_uri, teachers)
        distill = distill.model_copy(
            update={"teacher": str(path), "teacher_run_id": run_id or distill.teacher_run_id}
        )
    train = spec.trial.train.model_copy(update={"distill": distill})
    return spec.model_copy(update={"trial": spec.trial.model_copy(update={"train": train})})


def load_from_mlflow(run_id: str, tracking_uri: str | None = None, map_location: str = "cpu"):
    """The model a run logged (`checkpoint/checkpoint.pt`, from `tracking.checkpoints` or
    `vitscale train`), built from its config, with its weights, in eval mode.

    >>> model = load_from_mlflow("3f2a...", "sqlite:///mlflow.db")
    """
    client = store.client_for(tracking_uri or DEFAULT_TRACKING_URI)
    with tempfile.TemporaryDirectory() as tmp:
        with store.quiet_artifact_progress():
            local = client.download_artifacts(run_id, f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}", tmp)
        state = load_checkpoint(Path(local), map_location=map_location)
    config = state.model_config
    if config is None:  # older checkpoints: the run's model.* params
        params = client.get_run(run_id).data.params
        config = section_params(params, "model")
    model = build(ModelConfig.model_validate(config))
    model.load_state_dict(state.model)
    return model.eval()
