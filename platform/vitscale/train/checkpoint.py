"""Epoch checkpoints: everything needed to continue bit-for-bit, written atomically.

A checkpoint is one file, `checkpoint.pt`, in a directory (Ray Tune copies that directory to
its storage). It is written to a temporary name and renamed, so a crash or a failing epoch never
leaves a half-written or newer-but-bad checkpoint behind. Loading uses `weights_only=True`.
A file that cannot be read as a checkpoint (truncated, overwritten: disk errors, a copy cut short)
is a `DamagedCheckpoint`, so that a caller can tell it from a bug and, resuming a trial, start over.
"""

from __future__ import annotations

import errno
import os
import pickle
import random
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

CHECKPOINT_FILE = "checkpoint.pt"
# What torch.load raises on a file that is not a sound checkpoint: a cut zip archive ("failed finding
# central directory"), a corrupted one ("PytorchStreamReader ... invalid header or archive is
# corrupted", or OSError EINVAL), an empty file (EOFError), bytes that are no torch file (UnpicklingError); and a
# readable file that lacks TrainState's fields (TypeError).
_UNREADABLE = (EOFError, pickle.UnpicklingError, zipfile.BadZipFile, TypeError, AttributeError)
_ZIP_ERROR_WORDS = ("PytorchStreamReader", "zip archive", "corrupted")


class DamagedCheckpoint(Exception):
    """`path` exists but cannot be read as a checkpoint (`why`)."""

    def __init__(self, path: Path, why: str) -> None:
        super().__init__(f"{path}: not a readable checkpoint ({why})")
        self.path, self.why = path, why


@dataclass
class TrainState:
    """What `fit` needs to continue after `epoch` (1-based; 0 = nothing trained yet)."""

    epoch: int
    model: dict[str, Any]
    optimizer: dict[str, Any]
    scheduler: dict[str, Any]
    rng: dict[str, Any]
    history: list[dict[str, float]]
    model_config: dict[str, Any] | None = None  # the model as built: lets a checkpoint be a teacher
    trial_config: dict[str, Any] | None = None  # the resolved trial: its data, for `vitscale evaluate`
    # the hyperparameter values trained with, as steps (train.hyper_schedule); None: written before
    schedule: list[dict[str, Any]] | None = None


def capture_rng(data_generator: torch.Generator) -> dict[str, Any]:
    """RNG states as tensors and plain values (loadable with weights_only=True)."""
    _, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    py_version, py_state, py_gauss = random.getstate()
    state = {
        "torch": torch.get_rng_state(),
        "data": data_generator.get_state(),
        "python": list(py_state),
        "python_gauss": py_gauss,
        "numpy": torch.from_numpy(np_keys.astype(np.int64)),
        "numpy_rest": [int(np_pos), int(np_has_gauss), float(np_gauss)],
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any], data_generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_generator.set_state(state["data"])
    random.setstate((3, tuple(int(v) for v in state["python"]), state["python_gauss"]))
    pos, has_gauss, gauss = state["numpy_rest"]
    np.random.set_state(
        ("MT19937", state["numpy"].numpy().astype(np.uint32), int(pos), int(has_gauss), gauss)
    )
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(directory: str | Path, state: TrainState) -> Path:
    """Write `directory/checkpoint.pt` atomically and return its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / CHECKPOINT_FILE
    tmp = directory / f".{CHECKPOINT_FILE}.tmp-{os.getpid()}"
    torch.save(state.__dict__, tmp)
    os.replace(tmp, path)
    return path


def find_checkpoint(directory: str | Path | None) -> Path | None:
    if directory is None:
        return None
    path = Path(directory) / CHECKPOINT_FILE
    return path if path.is_file() else None


def load_checkpoint(path: str | Path, map_location: str | torch.device = "cpu") -> TrainState:
    """The state in `path`; DamagedCheckpoint when the file is not a sound checkpoint."""
    try:
        raw = torch.load(path, map_location=map_location, weights_only=True)
        return TrainState(**raw)
    except _UNREADABLE as exc:
        raise DamagedCheckpoint(Path(path), _first_line(exc)) from exc
    except OSError as exc:
        if exc.errno != errno.EINVAL:  # torch's zip reader on a cut file; not a missing or full disk
            raise
        raise DamagedCheckpoint(Path(path), _first_line(exc)) from exc
    except RuntimeError as exc:
        if not any(word in str(exc) for word in _ZIP_ERROR_WORDS):
            raise  # e.g. a CUDA checkpoint on a machine without one: not damage
        raise DamagedCheckpoint(Path(path), _first_line(exc)) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).split(". This is an internal")[0].splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text and text[0] else type(exc).__name__
