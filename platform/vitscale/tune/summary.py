"""The end-of-study summary, read back from MLflow (the record users see), not from memory."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from vitscale.pareto import pareto_mask
from vitscale.tracking import layout, store
from vitscale.tracking.tune_callback import completion_tags, result_metrics


@dataclass
class TrialRow:
    run_id: str
    trial_id: str
    name: str
    status: str
    stopped_early: bool
    failure_reason: str
    metrics: dict[str, float]


@dataclass
class StudySummary:
    study: str
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    objectives: list[tuple[str, str]]
    trials: list[TrialRow] = field(default_factory=list)
    best: list[TrialRow] = field(default_factory=list)  # one row, or the Pareto set
    tracking: str = ""  # how the MLflow writes went (delayed by an outage, none lost), tracking.queue

    @property
    def counts(self) -> dict[str, int]:
        return {
            "finished": sum(t.status == "FINISHED" and not t.stopped_early for t in self.trials),
            "stopped_early": sum(t.status == "FINISHED" and t.stopped_early for t in self.trials),
            "failed": sum(t.status == "FAILED" for t in self.trials),
            "killed": sum(t.status == "KILLED" for t in self.trials),
            "total": len(self.trials),
        }


def child_runs(client, experiment_id: str, parent_run_id: str) -> list:
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=f"tags.`{layout.PARENT_RUN_ID}` = '{parent_run_id}'",
            max_results=500,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


def close_orphans(client, execution, live_trial_ids: set[str]) -> None:
    """Child runs left RUNNING by a killed driver whose trial Tune no longer knows: KILLED."""
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        tags = run.data.tags
        if tags.get(layout.STATUS) == "RUNNING" and tags.get(layout.TRIAL_ID) not in live_trial_ids:
            store.set_tags(
                client,
                run.info.run_id,
                {layout.STATUS: "KILLED", layout.FAILURE_REASON: "driver stopped before it finished"},
            )
            client.set_terminated(run.info.run_id, "KILLED")


def close_completed(client, execution, results) -> None:
    """Trials Tune finished whose completion never reached MLflow — the driver (or the cluster)
    died between Tune saving the trial as done and the callback writing it — are finished from
    Tune's last result, so a resumed study ends with every run in its true state."""
    last = {r.metrics.get("trial_id"): r.metrics for r in results if r.metrics and r.error is None}
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        result = last.get(run.data.tags.get(layout.TRIAL_ID))
        if result is None or run.data.tags.get(layout.STATUS) != "RUNNING":
            continue
        run_id = run.info.run_id
        epoch = result.get("epoch")
        if epoch is not None and store.last_logged_step(client, run_id) < int(epoch):
            store.log_metrics(client, run_id, result_metrics(result), step=int(epoch))
        tags, status = completion_tags(result)
        store.set_tags(client, run_id, tags)
        client.set_terminated(run_id, status)


def summarise(client, execution) -> StudySummary:
    spec = execution.spec
    objectives = [(o.metric, o.mode) for o in spec.objectives]
    summary = StudySummary(
        spec.name, execution.parent_run_id, execution.experiment_id, execution.tracking_uri, objectives
    )
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        tags = run.data.tags
        summary.trials.append(
            TrialRow(
                run_id=run.info.run_id,
                trial_id=tags.get(layout.TRIAL_ID, ""),
                name=run.info.run_name or "",
                status=tags.get(layout.STATUS, run.info.status),
                stopped_early=tags.get(layout.STOPPED_EARLY) == "true",
                failure_reason=tags.get(layout.FAILURE_REASON, ""),
                metrics=dict(run.data.metrics),
            )
        )
    summary.best = best_trials(summary.trials, objectives)
    return summary


def best_trials(trials: list[TrialRow], objectives: list[tuple[str, str]]) -> list[TrialRow]:
    """The best finished trial (one objective) or the Pareto set (several)."""
    candidates = [
        t for t in trials if t.status == "FINISHED" and all(_finite(t.metrics.get(m)) for m, _ in objectives)
    ]
    if not candidates:
        return []
    if len(objectives) == 1:
        metric, mode = objectives[0]
        pick = max if mode == "max" else min
        return [pick(candidates, key=lambda t: t.metrics[metric])]
    points = np.array([[t.metrics[m] for m, _ in objectives] for t in candidates], dtype=float)
    mask = pareto_mask(points, [mode == "max" for _, mode in objectives])
    return [t for t, keep in zip(candidates, mask, strict=True) if keep]


def _finite(value) -> bool:
    return value is not None and math.isfinite(float(value))
