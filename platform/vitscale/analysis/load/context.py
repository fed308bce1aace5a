"""Facts about a study that live on its parent run, not on the trials: the comparison's reference
arm and borrowed tuning (tags), the searched ranges and the analysis settings (the `space` and
`analysis` of the `spec.yaml` artifact).

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
    """{"reference", "space", "analysis", "tuned_from"}: each a mapping or None (missing or unreadable)."""
    from mlflow.exceptions import MlflowException

    reference = None
    raw = parent.data.tags.get(layout.REFERENCE)
    if raw:
        try:
            reference = json.loads(raw)
        except json.JSONDecodeError:
            reference = None
    space = analysis = None
    try:
        with tempfile.TemporaryDirectory() as tmp, store.quiet_artifact_progress():
            path = client.download_artifacts(parent.info.run_id, SPEC_ARTIFACT, tmp)
            doc = yaml.safe_load(Path(path).read_text()) or {}
        doc = doc if isinstance(doc, dict) else {}
        space = doc.get("space") if isinstance(doc.get("space"), dict) else None
        analysis = doc.get("analysis") if isinstance(doc.get("analysis"), dict) else None
    except (MlflowException, OSError, yaml.YAMLError):
        space = analysis = None
    return {
        "reference": reference if isinstance(reference, dict) else None,
        "space": space,
        "analysis": analysis,
        "tuned_from": _json_tag(parent, layout.TUNED_FROM),
    }


def _json_tag(parent: Any, tag: str) -> Any:
    try:
        return json.loads(parent.data.tags.get(tag) or "null")
    except json.JSONDecodeError:
        return None
