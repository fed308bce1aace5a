"""`tuned_from: STUDY`: a comparison whose arms reuse the tuned points of an earlier comparison.

Tuning is most of a comparison's cost. A follow-up that asks a new question of the same tuned
arms — evaluate them at other resolutions, train them across resolutions — should not re-tune
each arm on a budget it cannot afford, nor fall back to one shared recipe: it takes each arm's
choice from the source study's latest finished execution (its parent run's `comparison.json`,
chosen on the source's validation). An arm here takes the source arm whose `arms:` values it
contains; keys the source did not have (e.g. `data.train_resolutions`) are this study's own, and
such arms run at the recipe tuned without them — a limit the report states. The final seeds must
be ones the source's tuning never saw. Resolved once, on the driver, before the parent run
exists; the choices are saved in the execution (resume reuses them) and the parent run is tagged
with the source run.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from vitscale.errors import UserError
from vitscale.study.comparison import arm_list
from vitscale.study.spec import StudySpec
from vitscale.tracking import layout, store

COMPARISON_ARTIFACT = layout.COMPARISON_ARTIFACT
SPEC_ARTIFACT = "spec.yaml"


def _source_run(client, name: str, uri: str):
    """The newest finished parent run of comparison study `name` that logged its choices."""
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        raise UserError(
            f"tuned_from: no study {name!r} in {uri}; run that comparison first "
            "(vitscale study run FILE), or point --tracking-uri at where it ran"
        )
    runs = store.search_all(
        client,
        [experiment.experiment_id],
        f"tags.`{layout.ROLE}` = 'study' and tags.`{layout.KIND}` = 'comparison' and "
        "attributes.status = 'FINISHED'",
    )
    for run in sorted(runs, key=lambda r: r.info.start_time, reverse=True):
        if any(a.path == COMPARISON_ARTIFACT for a in client.list_artifacts(run.info.run_id)):
            return run
    raise UserError(
        f"tuned_from: study {name!r} has no finished comparison execution in {uri} "
        "(only a finished kind: comparison logs its arms' choices); finish it with vitscale study resume"
    )


def _matching_choice(arm: dict[str, Any], choices: list[dict], name: str) -> dict:
    """The one source choice whose arm values this arm contains."""
    found = [
        c
        for c in choices
        if c.get("point") is not None and all(k in arm and arm[k] == v for k, v in c["values"].items())
    ]
    if len(found) != 1:
        what = "no tuned arm" if not found else f"{len(found)} tuned arms"
        offered = "; ".join(c["arm"] for c in choices if c.get("point") is not None) or "none"
        raise UserError(
            f"tuned_from: {what} of {name!r} matches arm {layout.arm_key(arm)} "
            f"(its arms with a tuned point: {offered}); give this study arms that contain exactly one"
        )
    return found[0]


def borrowed_choices(spec: StudySpec, uri: str) -> tuple[dict[str, dict], dict[str, Any]]:
    """({arm key: choice}, provenance) for every arm of `spec`, from study `spec.tuned_from`."""
    name = spec.tuned_from
    client = store.client_for(uri)
    run = _source_run(client, name, uri)
    run_id = run.info.run_id
    state = json.loads(store.artifact_text(client, run_id, COMPARISON_ARTIFACT))
    source_spec = yaml.safe_load(store.artifact_text(client, run_id, SPEC_ARTIFACT)) or {}
    tuning_seeds = set((source_spec.get("search") or {}).get("seeds") or [])
    reused = sorted(tuning_seeds & set(spec.final.seeds))
    if reused:
        raise UserError(
            f"final.seeds: {reused} tuned {name!r} (its search.seeds {sorted(tuning_seeds)}): final seeds "
            "must be ones selection never saw, e.g. final: {seeds: [100, 101, 102]}"
        )
    choices = list(state.get("choices", {}).values())
    borrowed = {}
    for arm in arm_list(spec):
        source = _matching_choice(arm, choices, name)
        key = layout.arm_key(arm)
        borrowed[key] = {**source, "arm": key, "values": dict(arm), "source_arm": source["arm"]}
    fidelity = (source_spec.get("search") or {}).get("fidelity")
    provenance = {"study": name, "run_id": run_id, "tuning_seeds": sorted(tuning_seeds), "fidelity": fidelity}
    return borrowed, provenance
