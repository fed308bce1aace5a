"""`tracking.wandb: {project, mode}`: every trial also goes to Weights & Biases, through Ray Tune's
`WandbLoggerCallback` (extra `wandb`). MLflow stays the record vitscale reads; W&B is a mirror.

offline (default) writes run folders only, no network and no API key, under `$WANDB_DIR` when
set, else `<execution>/wandb` (`wandb sync` uploads them later); online needs `wandb login` or
WANDB_API_KEY on the driver.
"""

from __future__ import annotations

import os
from pathlib import Path

from vitscale.errors import UserError


def wandb_callbacks(spec, directory: Path) -> list:
    config = spec.tracking.wandb
    if config is None:
        return []
    try:
        from ray.air.integrations.wandb import WandbLoggerCallback
    except ImportError:  # pragma: no cover - ray[tune] ships it; wandb itself is checked below
        raise UserError("tracking.wandb: Ray's W&B integration is missing; pip install 'ray[tune]'") from None
    try:
        import wandb  # noqa: F401
    except ImportError:
        raise UserError("tracking.wandb: wandb is not installed; pip install -e '.[wandb]'") from None
    if config.mode == "offline":
        os.environ["WANDB_MODE"] = "offline"  # Ray skips its API-key lookup for offline runs
    folder = Path(os.environ.get("WANDB_DIR") or directory / "wandb")
    folder.mkdir(parents=True, exist_ok=True)
    return [
        WandbLoggerCallback(
            project=config.project,
            group=spec.name,
            mode=config.mode,
            dir=str(folder),
            excludes=["failure_reason", "failure_message", "node_id"],
        )
    ]
