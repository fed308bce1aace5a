"""Distillation teachers: where a teacher comes from, what it is, whether it fits the student.

`train.distill.teacher` names a checkpoint (a `checkpoint.pt` file or the folder holding it), an
MLflow run (its id or `runs:/ID`: the run's `checkpoint/checkpoint.pt` artifact, as `vitscale
train` logs it and as `tracking.checkpoints` logs a study's best trials), a registered model
(`models:/NAME/VERSION` or `models:/NAME@ALIAS`: its source run's checkpoint) or, in a study,
`{best_of: STUDY, where: {...}}`. Everything that needs MLflow happens once, on the driver
(`resolve_source`, `resolve_best_of`), and ends in a local checkpoint file: trials only ever read
a path (inside the execution folder for studies, which every node sees).

The teacher's architecture comes from the checkpoint itself (`TrainState.model_config`, written
since distillation exists), else from `trial.json` beside it (`vitscale train --checkpoint-dir`)
or the MLflow run's `model.*` params, with channels and classes read off the weights.
`load_teacher` builds it once per worker process (cached by path and device), frozen, in eval mode.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import torch
import yaml
from torch import nn

from vitscale.errors import TeacherMismatch, UserError
from vitscale.models.config import ModelConfig
from vitscale.train.checkpoint import CHECKPOINT_FILE
from vitscale.train.config import TeacherRef

TEACHER_CONFIG_FILE = "teacher_model.json"  # the model config of a checkpoint fetched from MLflow
CHECKPOINT_ARTIFACT = "checkpoint"
_RUN_ID = re.compile(r"^[0-9a-f]{32}$")
_CACHE: dict[tuple[str, float, str], tuple[nn.Module, ModelConfig]] = {}


# ---------------------------------------------------------------- sources (driver side)


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
    elif _RUN_ID.match(source):
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
    from vitscale.tracking import store

    store.check_tracking_uri(tracking_uri)
    return store.client_for(tracking_uri)


def _registered_model_run(uri: str, tracking_uri: str | None) -> str:
    from mlflow.exceptions import MlflowException

    name, _, rest = uri.removeprefix("models:/").partition("/")
    alias = None
    if "@" in name:
        name, alias = name.split("@", 1)
    client = _client(tracking_uri or "sqlite:///mlflow.db")
    try:
        version = (
            client.get_model_version_by_alias(name, alias) if alias else client.get_model_version(name, rest)
        )
    except MlflowException as exc:
        raise TeacherMismatch(f"train.distill.teacher: {uri}: {str(exc).splitlines()[0]}") from None
    return version.run_id


def download_checkpoint(client, run_id: str, destination: Path) -> Path:
    """The run's `checkpoint/checkpoint.pt` artifact, downloaded (once), with its model config."""
    from mlflow.exceptions import MlflowException

    target = destination / CHECKPOINT_ARTIFACT / CHECKPOINT_FILE
    if target.is_file():
        return target
    try:
        run = client.get_run(run_id)
        names = [a.path for a in client.list_artifacts(run_id, CHECKPOINT_ARTIFACT)]
    except MlflowException as exc:
        raise TeacherMismatch(f"train.distill.teacher: run {run_id}: {str(exc).splitlines()[0]}") from None
    if f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}" not in names:
        raise TeacherMismatch(
            f"train.distill.teacher: run {run_id} has no logged checkpoint ({CHECKPOINT_ARTIFACT}/"
            f"{CHECKPOINT_FILE}); train the teacher with `vitscale train` or a study with "
            "tracking.checkpoints: best | all"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=destination) as tmp:
        local = client.download_artifacts(run_id, f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}", tmp)
        shutil.copyfile(local, target.with_suffix(".tmp"))
    target.with_suffix(".tmp").replace(target)
    model = _unflatten({k[6:]: v for k, v in run.data.params.items() if k.startswith("model.")})
    (target.parent / TEACHER_CONFIG_FILE).write_text(json.dumps(model, indent=2))
    return target


def _parse(value: str) -> Any:
    try:
        parsed = yaml.safe_load(value)
    except yaml.YAMLError:
        return value
    return None if parsed == "None" else parsed


def _unflatten(params: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in params.items():
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = _parse(value)
    return out


def resolve_best_of(ref: TeacherRef, tracking_uri: str, download_dir: Path) -> TeacherRef:
    """The best finished trial (final val_top1; test is never read) of study `ref.best_of` whose
    params match `ref.where`, one per combination of the `same` keys' values, downloaded."""
    from vitscale.tracking import layout

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
        if any(k not in params or _parse(params[k]) != v for k, v in fixed.items()):
            continue
        key = json.dumps([_parse(params.get(k, "None")) for k in ref.same_keys()])
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


# ---------------------------------------------------------------- the teacher (worker side)


def teacher_config(path: Path, state: dict[str, Any]) -> ModelConfig:
    """The teacher's ModelConfig: from the checkpoint, else from a config file beside it."""
    raw = state.get("model_config")
    if raw is None:
        for name in (TEACHER_CONFIG_FILE, "trial.json"):
            beside = path.parent / name
            if beside.is_file():
                data = json.loads(beside.read_text())
                raw = data.get("model", data) if name == "trial.json" else data
                break
    if raw is None:
        raise TeacherMismatch(
            f"train.distill.teacher: {path} does not say what model it holds (no model_config in it, "
            f"no {TEACHER_CONFIG_FILE} or trial.json beside it)"
        )
    weights = state["model"]
    raw = {
        **raw,
        "in_chans": weights["patch_embed.weight"].shape[1],
        "num_classes": weights["head.weight"].shape[0],
    }
    return ModelConfig.model_validate(raw)


def load_teacher(path: str | Path, device: torch.device) -> tuple[nn.Module, ModelConfig]:
    """The teacher, built once per process and device: frozen, in eval mode, on `device`."""
    from vitscale.models import build

    path = Path(path)
    if path.is_dir():
        path = path / CHECKPOINT_FILE
    if not path.is_file():
        raise TeacherMismatch(f"train.distill.teacher: {path} does not exist")
    key = (str(path.resolve()), path.stat().st_mtime, str(device))
    if key not in _CACHE:
        state = torch.load(path, map_location=device, weights_only=True)
        config = teacher_config(path, state)
        model = build(config).to(device)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError as exc:
            raise TeacherMismatch(
                f"train.distill.teacher: {path} does not load into {describe(config)}: {str(exc).splitlines()[0]}"
            ) from None
        model.eval().requires_grad_(False)
        _CACHE[key] = (model, config)
    return _CACHE[key]


def describe(config: ModelConfig, resolution: int | None = None) -> str:
    res = resolution or config.image_size
    grid = res // config.patch_size
    from vitscale.models.vit import VisionTransformer

    return (
        f"mixer={config.mixer}, regime={config.regime}, width={config.width}, depth={config.depth}, "
        f"grid={grid}x{grid} (patch {config.patch_size} at {res}px), "
        f"prefix_tokens={VisionTransformer.num_prefix_tokens}"
    )


def check_compatible(
    teacher: ModelConfig, student: ModelConfig, layers: list[int], resolution: int, logits: bool
) -> None:
    """Same width, token grid at this resolution, prefix tokens; teacher depth = student depth
    (block k <-> t_k = k·t_end/depth); layers within 1..depth; classes when logits are distilled."""
    problems = []
    if teacher.width != student.width:
        problems.append(f"width {teacher.width} != {student.width}")
    if teacher.patch_size != student.patch_size:
        problems.append(f"token grid differs (patch {teacher.patch_size} != {student.patch_size})")
    if teacher.depth != student.depth:
        problems.append(f"teacher depth {teacher.depth} != student depth {student.depth} (its time grid)")
    bad = [k for k in layers if not 1 <= k <= student.depth]
    if bad:
        problems.append(f"layers {bad} outside 1..{student.depth}")
    if logits and teacher.num_classes != student.num_classes:
        problems.append(f"classes {teacher.num_classes} != {student.num_classes}")
    if problems:
        raise TeacherMismatch(
            f"train.distill.teacher: teacher ({describe(teacher, resolution)}) cannot guide student "
            f"({describe(student, resolution)}): {'; '.join(problems)}"
        )
