"""Facts about a study that live on its parent run, not on the trials: the comparison's reference
arm (tag) and the searched ranges (the `space` of the `spec.yaml` artifact).

They are stored in runs.parquet's metadata so `--from` redraws the same report without MLflow.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import yaml

from vitscale.tracking import layout, store

SPEC_ARTIFACT = "spec.yaml"


def parent_context(client: Any, parent: Any) -> dict:
    """{"reference": {...} | None, "space": {...} | None}; a missing or unreadable piece is None."""
    from mlflow.exceptions import MlflowException

    reference = None
    raw = parent.data.tags.get(layout.REFERENCE)
    if raw:
        try:
            reference = json.loads(raw)
        except json.JSONDecodeError:
            reference = None
    space = None
    try:
        with tempfile.TemporaryDirectory() as tmp, store.quiet_artifact_progress():
            path = client.download_artifacts(parent.info.run_id, SPEC_ARTIFACT, tmp)
            doc = yaml.safe_load(Path(path).read_text()) or {}
        space = doc.get("space") if isinstance(doc, dict) and isinstance(doc.get("space"), dict) else None
    except (MlflowException, OSError, yaml.YAMLError):
        space = None
    return {"reference": reference if isinstance(reference, dict) else None, "space": space}
