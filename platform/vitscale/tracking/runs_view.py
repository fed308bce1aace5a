"""The study's key metrics as the columns of MLflow's runs table: a saved view on its experiment.

MLflow's runs table shows Source, Models and Dataset by default; which params and metrics it adds
is the browser's own state (local storage), which no server can set. What MLflow 3.15+ keeps on the
server is a *saved view* (Runs page -> Views): the experiment tag `mlflow.sharedViewState.<id>`,
whose value is `{"name", "createdAt", "updatedAt", "state"}` with `state` the runs page's state
as JSON (columns as `metrics.`val_top1``, the sort, ...); MLflow's own demo seeds views the same
way. It does not open by itself: the UI lists it under Views, and `layout.saved_view_url` opens
it directly (the study summary prints that link).

The view of a study: its status and, for a comparison, phase and arm tags; the mixer and regime
and every searched key (params); the constants `params` and `flops_per_image`; the objectives,
test top-1/top-5 and images seen (metrics); sorted by the first objective, best first.
"""

from __future__ import annotations

import json
import time
from typing import Any

from vitscale.tracking import layout
from vitscale.tracking.parent_summary import PARENT_RUNS

TEST_METRICS = ("test_top1", "test_top5")


def _column(kind: str, key: str) -> str:
    """The runs table's canonical column key: metrics.`val_top1`."""
    return f"{kind}.`{key}`"


def view_state(spec: Any) -> dict[str, Any]:
    """The runs page state of a study's view (the fields MLflow's runs page restores; the rest
    keep MLflow's defaults)."""
    kind = PARENT_RUNS[spec.kind]
    objectives = [o.metric for o in spec.objectives]
    tags = [layout.STATUS] + ([layout.PHASE, layout.ARM] if kind.arm_phases else [])
    params = [*layout.ARM_FIELDS, *(spec.space or {}), *layout.CONSTANT_METRICS] if kind.model_runs else []
    metrics = [*objectives, *TEST_METRICS, "images_seen"] if kind.model_runs else list(layout.BENCH_METRICS)
    columns = [_column("attributes", "Models")]
    columns += [_column("tags", key) for key in tags]
    columns += [_column("params", key) for key in dict.fromkeys(params)]
    columns += [_column("metrics", key) for key in dict.fromkeys(metrics)]
    first = spec.objectives[0] if spec.objectives else None
    return {
        "selectedColumns": columns,
        "orderByKey": _column("metrics", first.metric) if first else "attributes.start_time",
        "orderByAsc": bool(first and first.mode == "min"),
    }


def save_view(client, experiment_id: str, spec: Any) -> str:
    """Save (or replace) the study's view on its experiment; its tag key."""
    now = int(time.time() * 1000)
    value = {
        "name": layout.saved_view_name(spec.name),
        "createdAt": now,
        "updatedAt": now,
        "state": json.dumps(view_state(spec), separators=(",", ":")),
    }
    key = layout.SAVED_VIEW_PREFIX + layout.saved_view_id(spec.name)
    client.set_experiment_tag(experiment_id, key, json.dumps(value, separators=(",", ":")))
    return key
