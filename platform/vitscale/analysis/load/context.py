"""Facts about a study that live on its parent run, not on the trials: the comparison's reference
arm and borrowed tuning (tags), the searched ranges, the tuning fidelity and the analysis settings
(the `space`, `search.fidelity` and `analysis` of the `spec.yaml` artifact), and each arm's
confirmation at full fidelity (the `comparison.json` artifact a finished comparison logs).

They are stored in runs.parquet's metadata so `--from` redraws the same report without MLflow.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from vitscale.tracking import layout, store

SPEC_ARTIFACT = "spec.yaml"


def parent_context(client: Any, parent: Any) -> dict:
    """{"reference", "space", "fidelity", "analysis", "searcher", "tuned_from", "confirmation"}: each a mapping
    or None (missing or unreadable); "confirmation" maps each confirmed arm's tag to its record."""
    reference = None
    raw = parent.data.tags.get(layout.REFERENCE)
    if raw:
        try:
            reference = json.loads(raw)
        except json.JSONDecodeError:
            reference = None
    space = analysis = fidelity = searcher = None
    try:
        doc = yaml.safe_load(store.artifact_text(client, parent.info.run_id, SPEC_ARTIFACT)) or {}
        doc = doc if isinstance(doc, dict) else {}
        space = doc.get("space") if isinstance(doc.get("space"), dict) else None
        analysis = doc.get("analysis") if isinstance(doc.get("analysis"), dict) else None
        search = doc.get("search") if isinstance(doc.get("search"), dict) else {}
        fidelity = search.get("fidelity") if isinstance(search.get("fidelity"), dict) else None
        searcher = _searcher(doc, search)
    except (store.mlflow_exception(), OSError, yaml.YAMLError):
        space = analysis = fidelity = searcher = None
    return {
        "reference": reference if isinstance(reference, dict) else None,
        "space": space,
        "fidelity": fidelity,
        "analysis": analysis,
        "searcher": searcher,
        "tuned_from": _json_tag(parent, layout.TUNED_FROM),
        "confirmation": _confirmations(client, parent),
    }


def _searcher(doc: dict, search: dict) -> dict:
    """{"algorithm", "sampler_seed", "scheduler", "objective": {"metric", "mode"}}: how the study
    searched (the best-so-far curves' lines and the score they follow)."""
    scheduler = doc.get("scheduler") if isinstance(doc.get("scheduler"), dict) else {}
    objectives = doc.get("objectives") if isinstance(doc.get("objectives"), list) else []
    first = objectives[0] if objectives and isinstance(objectives[0], dict) else None
    return {
        "algorithm": search.get("algorithm"),
        "sampler_seed": search.get("sampler_seed"),
        "scheduler": scheduler.get("type"),
        "objective": first,
    }


def parent_searchers(parents: list[Any]) -> dict[str, dict]:
    """{parent run id: {"algorithm", "sampler_seed", "scheduler"}} from each execution's params, so
    executions of one study with different searchers or sampler seeds (`--set search.algorithm=gp
    --set search.sampler_seed=1`) each draw their own best-so-far line."""
    out = {}
    for parent in parents:
        params = parent.data.params
        if not params.get("search.algorithm"):
            continue
        seed = params.get("search.sampler_seed")
        out[parent.info.run_id] = {
            "algorithm": params["search.algorithm"],
            "sampler_seed": int(seed) if seed and seed.lstrip("-").isdigit() else None,
            "scheduler": params.get("scheduler.type"),
        }
    return out


def _confirmations(client: Any, parent: Any) -> dict | None:
    """{arm tag: its confirmation record} from `comparison.json` (logged when the study finished);
    None for a study that confirmed nothing (no RANK_TRANSFER tag), while it runs, or unreadable."""
    if layout.RANK_TRANSFER not in parent.data.tags:
        return None  # no download for studies that never confirmed
    try:
        record = json.loads(store.artifact_text(client, parent.info.run_id, layout.COMPARISON_ARTIFACT))
    except (store.mlflow_exception(), OSError, json.JSONDecodeError):
        return None
    choices = record.get("choices") if isinstance(record, dict) else None
    if not isinstance(choices, dict):
        return None
    return {k: c["confirmation"] for k, c in choices.items() if isinstance(c, dict) and c.get("confirmation")}


def _json_tag(parent: Any, tag: str) -> Any:
    try:
        return json.loads(parent.data.tags.get(tag) or "null")
    except json.JSONDecodeError:
        return None
