"""The end-of-study summary, read back from MLflow (the record users see), not from memory.

"Best" follows the protocol (`tracking.seed_mean`): configurations ranked by their seed mean, with n;
a comparison's by its final runs only (fresh seeds, full fidelity), named by arm; several
objectives, or a benchmark, give one front per resolution.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vitscale.tracking import layout, store
from vitscale.tracking.seed_mean import ConfigMean, Replicate, best_per_resolution, config_label, seed_means
from vitscale.tracking.tune_callback import completion_tags, result_metrics
from vitscale.tune.kinds import TUNE_KINDS

RESOLUTION_PARAMS = ("data.resolution", "model.image_size")  # trials, benchmark configurations
SEED_PARAMS = ("train.seed", "bench.seed")


@dataclass
class TrialRow:
    run_id: str
    trial_id: str
    name: str
    status: str
    stopped_early: bool
    failure_reason: str
    metrics: dict[str, float]
    params: dict[str, str] = field(default_factory=dict)
    config_key: str = ""  # replicates of one configuration share it (layout.CONFIG_KEY)
    phase: str = ""  # comparison studies: "tune" | "confirm" | "final"


@dataclass
class StudySummary:
    study: str
    parent_run_id: str
    experiment_id: str
    tracking_uri: str
    objectives: list[tuple[str, str]]
    trials: list[TrialRow] = field(default_factory=list)
    # resolution (None: not split) -> the best configuration by seed mean, or the Pareto set
    best: dict[Any, list[ConfigMean]] = field(default_factory=dict)
    tracking: str = ""  # how the MLflow writes went (delayed by an outage, none lost), tracking.queue
    directory: str = ""  # the execution folder: Tune's state, the Optuna DB, vitscale-study.json
    kind: str = "train"
    arms: list[dict] | None = None  # a study run in arms (tune.comparison): each arm's choice and runs

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


def close_orphans(
    client, execution, live_trial_ids: set[str], reason: str = "driver stopped before it finished"
) -> None:
    """Child runs left RUNNING by a killed driver whose trial Tune no longer knows: KILLED."""
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        tags = run.data.tags
        if tags.get(layout.STATUS) == "RUNNING" and tags.get(layout.TRIAL_ID) not in live_trial_ids:
            store.set_tags(client, run.info.run_id, {layout.STATUS: "KILLED", layout.FAILURE_REASON: reason})
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
        store.log_params(client, run_id, layout.constant_params(result))
        client.set_terminated(run_id, status)


def summarise(client, execution) -> StudySummary:
    spec = execution.spec
    objectives = [(o.metric, o.mode) for o in spec.objectives]
    summary = StudySummary(
        spec.name, execution.parent_run_id, execution.experiment_id, execution.tracking_uri, objectives
    )
    summary.directory, summary.kind = str(execution.directory), spec.kind
    for run in child_runs(client, execution.experiment_id, execution.parent_run_id):
        summary.trials.append(trial_row(run))
    summary.best = best_by_seed_mean(summary.trials, objectives, spec)
    return summary


def trial_row(run) -> TrialRow:
    """One child run as the summary (and `study status`) reads it."""
    tags = run.data.tags
    return TrialRow(
        run_id=run.info.run_id,
        trial_id=tags.get(layout.TRIAL_ID, ""),
        name=run.info.run_name or "",
        status=tags.get(layout.STATUS, run.info.status),
        stopped_early=tags.get(layout.STOPPED_EARLY) == "true",
        failure_reason=tags.get(layout.FAILURE_REASON, ""),
        metrics=layout.run_values(run.data.metrics, run.data.params),
        params=dict(run.data.params),
        config_key=tags.get(layout.CONFIG_KEY, ""),
        phase=tags.get(layout.PHASE, ""),
    )


def best_by_seed_mean(trials: list[TrialRow], objectives: list[tuple[str, str]], spec) -> dict:
    """resolution -> the best configuration by seed mean (one objective) or the Pareto set of seed
    means (several), as the study's kind ranks them (`TuneKind.best`). Only runs that finished
    every epoch count."""
    return TUNE_KINDS[spec.kind].best(trials, objectives, spec)


def _complete(trials: list[TrialRow]) -> list[TrialRow]:
    return [t for t in trials if t.status == "FINISHED" and not t.stopped_early]


def _ranked(rows: list[TrialRow], objectives, keys: list[str], split: bool) -> dict:
    """Seed means of `rows` named by `keys`, best per resolution where `split` (else key None)."""
    replicates = [
        Replicate(
            key=t.config_key or t.name,
            label=config_label(label_values(t.params, keys)),
            metrics=t.metrics,
            resolution=resolution_of(t.params) if split else None,
        )
        for t in rows
    ]
    return best_per_resolution(seed_means(replicates), objectives)


def searched_best(trials: list[TrialRow], objectives: list[tuple[str, str]], spec) -> dict:
    """A train study: configurations named by its searched keys; one objective gives one entry
    (key None), several one front per resolution, so a front never mixes 32 px with 64 px."""
    rows, split = _complete(trials), len(objectives) > 1
    keys = list(spec.space) if spec.space else label_keys(rows, drop=RESOLUTION_PARAMS if split else ())
    return _ranked(rows, objectives, keys, split)


def configuration_best(trials: list[TrialRow], objectives: list[tuple[str, str]], spec) -> dict:
    """A benchmark: its configurations rank per resolution, named by what differs between them."""
    rows = _complete(trials)
    return _ranked(rows, objectives, label_keys(rows, drop=RESOLUTION_PARAMS), True)


def final_arm_best(trials: list[TrialRow], objectives: list[tuple[str, str]], spec) -> dict:
    """A comparison: its final runs only (fresh seeds, full fidelity), named by arm."""
    rows, split = [t for t in _complete(trials) if t.phase == "final"], len(objectives) > 1
    return _ranked(rows, objectives, list(spec.arms), split)


def first_objective(spec) -> tuple[str, str]:
    """The objective a study's progress line and status rank by."""
    return spec.objectives[0].metric, spec.objectives[0].mode


def no_best(spec) -> None:
    """A benchmark: its configurations compare only within a resolution, no one best."""
    return None


def label_keys(rows: list[TrialRow], drop=()) -> list[str]:
    """The params that name a configuration where no searched key does: every param that differs
    between configurations while constant across each one's seeds."""
    groups: dict[str, list[dict]] = {}
    for row in rows:
        groups.setdefault(row.config_key or row.name, []).append(row.params)
    derived = set(layout.CONSTANT_METRICS)  # params, flops_per_image: follow from the configuration
    names = sorted(
        {k for row in rows for k in row.params} - set(SEED_PARAMS) - set(drop) - derived, key=_label_order
    )
    per_group = [{name: {p.get(name) for p in members} for name in names} for members in groups.values()]
    return [
        name
        for name in names
        if all(len(g[name]) == 1 for g in per_group) and len({next(iter(g[name])) for g in per_group}) > 1
    ]


LEADING_LABEL_LEAVES = ("mixer", "regime")  # a configuration reads 'attention · discrete · sdpa'


def _label_order(name: str) -> tuple[int, str]:
    leaf = name.rsplit(".", 1)[-1]
    rank = LEADING_LABEL_LEAVES.index(leaf) if leaf in LEADING_LABEL_LEAVES else len(LEADING_LABEL_LEAVES)
    return rank, name


def label_values(params: dict[str, str], keys: list[str]) -> dict[str, Any]:
    """The values of `keys` in a run's params (a section key: every param under it), parsed."""
    values: dict[str, Any] = {}
    for key in keys:
        if key in params:
            values[key] = _parsed(params[key])
        else:
            values.update({k: _parsed(v) for k, v in params.items() if k.startswith(key + ".")})
    return values


def resolution_of(params: dict[str, str]) -> Any:
    return next((_parsed(params[k]) for k in RESOLUTION_PARAMS if k in params), None)


def _parsed(text: str) -> Any:
    """An MLflow param (always a string) back as the number it was, None for 'None'."""
    if text in ("None", ""):
        return None
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text
