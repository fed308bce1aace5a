"""What a trial leaves besides metrics: its final checkpoint and its stdout/stderr, as artifacts
of its child run (written by the driver through the execution's write queue).

- Checkpoints (`tracking.checkpoints`): `all` logs every finished trial's final checkpoint when it
  completes; `best` (default), at the end of the experiment, those of the best configuration per
  arm (mixer x regime; a comparison phase: its `vitscale.arm`) by the first objective's seed mean,
  or of every configuration on the Pareto front of several objectives. Objectives are validation
  metrics (spec checks refuse test ones), so test never chooses. The artifact is
  `checkpoint/checkpoint.pt`, the file `fit` writes (weights, optimizer, history and the model's
  config); `load_from_mlflow(run_id)` gives the model back.
- Logs: Ray writes each trial's stdout/stderr to `stdout`/`stderr` in the trial's working folder
  (`RunConfig(log_to_file=True)`, synced to the trial folder in storage with every checkpoint);
  they are copied beside the queue at completion and logged under `logs/`.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

CHECKPOINT_ARTIFACT = "checkpoint"  # as `vitscale train` logs it and train.teacher reads it
LOGS_ARTIFACT = "logs"
LOG_FILES = ("stdout", "stderr")
STAGING_DIR = "tracking-artifacts"  # in the execution folder: copies the queue sends from
CHECKPOINT_TAG = "vitscale.checkpoint"  # "best" | "all": why the run has checkpoint/checkpoint.pt


def _local_trial_dir(trial) -> Path | None:
    """The trial's folder in storage when storage is a filesystem the driver sees (not s3://)."""
    storage = getattr(trial, "storage", None)
    filesystem = getattr(storage, "storage_filesystem", None)
    if filesystem is not None and getattr(filesystem, "type_name", "local") != "local":
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
        import numpy as np

        from vitscale.analysis.pareto import pareto_mask

        keys = list(means)
        mask = pareto_mask(np.array([means[k] for k in keys], float), [m == "max" for _, m in objectives])
        chosen = {k for k, keep in zip(keys, mask, strict=True) if keep}
    return [e for key in sorted(chosen) for e in groups[key]]


def load_from_mlflow(run_id: str, tracking_uri: str | None = None, map_location: str = "cpu"):
    """The model a run logged (`checkpoint/checkpoint.pt`, from `tracking.checkpoints` or
    `vitscale train`), built from its config, with its weights, in eval mode.

    >>> model = load_from_mlflow("3f2a...", "sqlite:///mlflow.db")
    """
    import tempfile

    from mlflow import MlflowClient

    from vitscale.models import ModelConfig, build
    from vitscale.train.checkpoint import CHECKPOINT_FILE, load_checkpoint

    client = MlflowClient(tracking_uri=tracking_uri)
    with tempfile.TemporaryDirectory() as tmp:
        local = client.download_artifacts(run_id, f"{CHECKPOINT_ARTIFACT}/{CHECKPOINT_FILE}", tmp)
        state = load_checkpoint(Path(local), map_location=map_location)
    config = state.model_config
    if config is None:  # older checkpoints: the run's model.* params
        from vitscale.train.teacher import _unflatten

        params = client.get_run(run_id).data.params
        config = _unflatten({k[6:]: v for k, v in params.items() if k.startswith("model.")})
    model = build(ModelConfig.model_validate(config))
    model.load_state_dict(state.model)
    return model.eval()
