"""What a trial leaves besides metrics: its final checkpoint and its stdout/stderr, as artifacts
of its child run (written by the driver through the execution's write queue).

- Checkpoints (`tracking.checkpoints`): `all` logs every finished trial's final checkpoint when it
  completes; `best` (default), at the end of the experiment, those of the best configuration per
  arm (mixer x regime; a comparison phase: its `vitscale.arm`) by the first objective's seed mean,
  or of every configuration on the Pareto front of several objectives. Objectives are validation
  metrics (spec checks refuse test ones), so test never chooses. The artifact is
  `checkpoint/checkpoint.pt`, the file `fit` writes (weights, optimizer, history and the model's
  config); `train.from_mlflow.load_from_mlflow(run_id)` gives the model back.
- Model: every trial that ran all its planned epochs, as an MLflow Model (`served/` beside its last
  checkpoint, logged by the queue's sender: see tracking.logged_model).
- Predictions: every finished trial's per-image predictions on val and test
  (`predictions/{val,test}.parquet`, written beside its last checkpoint; see tracking.predictions).
- Logs: Ray writes each trial's stdout/stderr to `stdout`/`stderr` in the trial's working folder
  (`RunConfig(log_to_file=True)`, synced to the trial folder in storage with every checkpoint);
  they are copied beside the queue at completion and logged under `logs/`. `fit` prints nothing
  inside Ray (no progress bar there), so these files stayed empty: the trainable writes its own
  lines with `trial_log` — the trial's configuration, one line per epoch (losses, val and, at the
  end, test top-1, lr, time), a failure's reason — into the trial's `stdout` file only. Ray
  forwards a worker's own stdout to the driver's terminal, where the study's progress lines are.
"""

from __future__ import annotations

import math
import shutil
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from vitscale.pareto import pareto_mask
from vitscale.tracking.layout import INPUT_EXAMPLE_FILE, PREDICTIONS_ARTIFACT, SERVED_DIR, SERVED_MODEL_FILE

CHECKPOINT_ARTIFACT = "checkpoint"  # as `vitscale train` logs it and train.from_mlflow reads it
LOGS_ARTIFACT = "logs"
LOG_FILES = ("stdout", "stderr")
STAGING_DIR = "tracking-artifacts"  # in the execution folder: copies the queue sends from


def _local_trial_dir(trial) -> Path | None:
    """The trial's folder in storage when storage is a filesystem the driver sees (not s3://).
    Local disk is pyarrow's "local" or a wrapper of it whose type name ends so (the signed state
    filesystem of tune.signed_storage: "py::vitscale-signed-local")."""
    storage = getattr(trial, "storage", None)
    filesystem = getattr(storage, "storage_filesystem", None)
    if filesystem is not None and not getattr(filesystem, "type_name", "local").endswith("local"):
        return None
    path = Path(trial.path)
    return path if path.is_dir() else None


def final_checkpoint(trial) -> Path | None:
    """`checkpoint.pt` of the trial's newest checkpoint folder in storage (Tune keeps the last few)."""
    trial_dir = _local_trial_dir(trial)
    if trial_dir is None:
        return None
    found = sorted(trial_dir.glob("checkpoint_*/checkpoint.pt"))
    return found[-1] if found else None


def final_predictions(trial) -> list[Path]:
    """The per-image predictions (`predictions/{val,test}.parquet`) beside the trial's final
    checkpoint in storage: `fit` writes them at its last epoch (tracking.predictions)."""
    checkpoint = final_checkpoint(trial)
    if checkpoint is None:
        return []
    return sorted((checkpoint.parent / PREDICTIONS_ARTIFACT).glob("*.parquet"))


def final_model(trial) -> Path | None:
    """The folder of the served model (layout.SERVED_DIR) beside the trial's final checkpoint in
    storage: `fit` writes it at its last epoch; the driver logs it as an MLflow Model."""
    checkpoint = final_checkpoint(trial)
    if checkpoint is None:
        return None
    folder = checkpoint.parent / SERVED_DIR
    return (
        folder if (folder / SERVED_MODEL_FILE).is_file() and (folder / INPUT_EXAMPLE_FILE).is_file() else None
    )


def stage_logs(trial, staging: Path) -> list[Path]:
    """Copies of the trial's stdout/stderr (working folder first: it has what came after the last
    checkpoint; else the copy synced to storage)."""
    folders = []
    storage = getattr(trial, "storage", None)
    try:
        folders.append(Path(storage.trial_working_directory))
    except Exception:  # noqa: BLE001 - no storage context (a restored trial before it ran)
        pass
    trial_dir = _local_trial_dir(trial)
    if trial_dir is not None:
        folders.append(trial_dir)
    staged = []
    for name in LOG_FILES:
        source = next((f / name for f in folders if (f / name).is_file()), None)
        if source is None:
            continue
        target = staging / trial.trial_id / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        staged.append(target)
    return staged


# What one epoch's log line shows, in order: (metric, format); top-1 values as percentages.
EPOCH_LINE_FIELDS = (
    ("train_loss", "train_loss {:.4f}"),
    ("val_loss", "val_loss {:.4f}"),
    ("val_top1", "val_top1 {:.2%}"),
    ("test_loss", "test_loss {:.4f}"),
    ("test_top1", "test_top1 {:.2%}"),
    ("lr", "lr {:.3g}"),
    ("train_images_per_second", "{:.0f} img/s"),
    ("epoch_seconds", "{:.1f} s"),
)


def _trial_stdout():
    """The running trial's own stdout file: Ray Tune's log_to_file replaces sys.stdout by a Tee
    of (the worker's stdout, the trial's file) for each trial, a reused worker's next trial
    included; None outside such a trial."""
    stream = getattr(sys.stdout, "stream2", None)
    return stream if Path(str(getattr(stream, "name", ""))).name == LOG_FILES[0] else None


def trial_log(line: str) -> None:
    """Append one timestamped line to the running trial's stdout file, flushed at once (the driver
    copies the file when the trial completes); nothing outside a Tune trial."""
    stream = _trial_stdout()
    if stream is None:
        return
    try:
        stream.write(f"{time.strftime('%Y-%m-%d %H:%M:%S')} {line.rstrip()}\n")
        stream.flush()
    except (OSError, ValueError):
        pass  # a closed file (the worker moved on): a log line never fails a trial


def epoch_line(metrics: Mapping[str, float], epochs: int) -> str:
    """'epoch 2/6  train_loss 1.2345  val_loss 1.1111  val_top1 45.31%  lr 0.003  1234 img/s  2.1 s'."""
    parts = [f"epoch {int(metrics.get('epoch', 0))}/{epochs}"]
    parts += [fmt.format(metrics[key]) for key, fmt in EPOCH_LINE_FIELDS if _finite(metrics.get(key))]
    return "  ".join(parts)


def _finite(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def choose_best(entries: list[dict], objectives: list[tuple[str, str]]) -> list[dict]:
    """`entries`: {arm, config_key, metrics} of complete trials. The entries of the best
    configuration per arm (one objective, by its mean over seeds) or of the Pareto front of the
    configurations' means (several objectives)."""
    groups: dict[tuple[str, str], list[dict]] = {}
    for entry in entries:
        if all(_finite(entry["metrics"].get(m)) for m, _ in objectives):
            groups.setdefault((entry["arm"], entry["config_key"]), []).append(entry)
    means = {
        key: [sum(e["metrics"][m] for e in group) / len(group) for m, _ in objectives]
        for key, group in groups.items()
    }
    if not means:
        return []
    if len(objectives) == 1:
        sign = 1 if objectives[0][1] == "max" else -1
        best: dict[str, tuple[str, str]] = {}
        for key, (value,) in means.items():
            if key[0] not in best or sign * value > sign * means[best[key[0]]][0]:
                best[key[0]] = key
        chosen = set(best.values())
    else:
        keys = list(means)
        mask = pareto_mask(np.array([means[k] for k in keys], float), [m == "max" for _, m in objectives])
        chosen = {k for k, keep in zip(keys, mask, strict=True) if keep}
    return [e for key in sorted(chosen) for e in groups[key]]
