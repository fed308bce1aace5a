"""Distillation teachers on the worker side: what a teacher is, whether it fits the student, and
the teacher itself, built once per worker process.

Where a teacher comes from (a checkpoint, an MLflow run, a registered model, `best_of` a study) is
resolved on the driver by `train.from_mlflow`, which ends in a local checkpoint file. The teacher's
architecture comes from the checkpoint itself (`TrainState.model_config`, written since
distillation exists), else from `trial.json` beside it (`vitscale train --checkpoint-dir`) or the
MLflow run's `model.*` params, with channels and classes read off the weights. `load_teacher`
builds it once per worker process (cached by path and device), frozen, in eval mode.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from vitscale.errors import TeacherMismatch
from vitscale.models import build
from vitscale.models.config import ModelConfig
from vitscale.models.vit import VisionTransformer
from vitscale.train.checkpoint import CHECKPOINT_FILE
from vitscale.train.from_mlflow import TEACHER_CONFIG_FILE

# A reused worker runs trial after trial (tune.worker_cache), often alternating between the arms'
# teachers; keep the most recently used few, so a long study cannot fill the device with them.
TEACHERS_KEPT = 2
_CACHE: OrderedDict[tuple[str, float, str], tuple[nn.Module, ModelConfig]] = OrderedDict()


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
    """The teacher, built once per process and device (the last TEACHERS_KEPT kept): frozen, in
    eval mode, on `device`."""
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
        while len(_CACHE) > TEACHERS_KEPT:
            _CACHE.popitem(last=False)
    _CACHE.move_to_end(key)
    return _CACHE[key]


def describe(config: ModelConfig, resolution: int | None = None) -> str:
    res = resolution or config.image_size
    grid = res // config.patch_size
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
