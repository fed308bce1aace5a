"""The study's parent run as a row people can sort: what the study was, and what it found.

MLflow's experiment table lists parent runs beside their trials; without params and metrics of
its own a parent shows nothing, and studies cannot be compared by their result. So:

- Params (logged when the execution starts, again on resume for what is missing):
  `study.kind`, `search.algorithm`, `search.num_samples`, `search.sampler_seed` (samplers),
  `search.seeds`, `search.max_concurrent_trials`, `scheduler.type`, `objectives`
  (`val_top1:max`), `space` (the searched keys), `budget.trials` (trials planned); a comparison
  also `arms` (display names), `final.seeds`.
- Metrics (logged at the end of every run and resume, read back from the child runs in MLflow):
  `trials_planned`, `trials_finished` (every epoch ran), `trials_stopped_early`, `trials_failed`,
  `trials_killed`; the best configuration by its seed mean of the first objective,
  `best_<objective>` (e.g. `best_val_top1`), the same configuration's `best_<test metric>` and
  `best_n_seeds`; per arm `arm/<arm>/<objective>_mean`, `arm/<arm>/<test metric>_mean` and
  `arm/<arm>/n` — a comparison's arms from their final runs (plus `arm/<arm>/tuning_<objective>`,
  the tuned configuration's seed mean in tuning, and where tuning ran at a fidelity
  `arm/<arm>/rank_transfer_rho` and `arm/<arm>/rank_transfer_n`, logged as each arm's confirmation
  ends), a train study's arms (mixer x regime, where it has more than one) from their best
  configuration. `<arm>` is the arm's display name with characters MLflow refuses in a metric
  name replaced (`ssog_ode`). Benchmarks get the counts.

Grouping follows the replicate contract: runs of one configuration share `vitscale.config_key`;
only finished runs that ran every epoch enter a mean, and a metric is averaged only where every
seed of the group has it.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from vitscale.kinds.table import KindTable
from vitscale.tracking import layout, store

_REFUSED = re.compile(r"[^A-Za-z0-9_\-. /:]+")  # what MLflow accepts in a metric name, negated


def metric_name(text: str) -> str:
    """`text` with every run of characters MLflow refuses in a metric name replaced by `_`."""
    return _REFUSED.sub("_", text).strip("_") or "_"


def arm_metric_label(arm_tag: str) -> str:
    """An ARM tag -> the arm's part of a metric name: 'model.mixer=ssog,model.regime=ode' -> 'ssog_ode'."""
    return metric_name(layout.arm_display(arm_tag, sep="_"))


def test_metric(objective: str) -> str | None:
    """The test counterpart of a validation objective (val_top1 -> test_top1); None for others."""
    return "test_" + objective.removeprefix("val_") if objective.startswith("val_") else None


def study_params(spec: Any, planned: int) -> dict[str, str]:
    """The study's definition as the parent run's params (see the module docstring): those of
    every study, then its kind's (`ParentRun.params`)."""
    search = spec.search
    params = {
        "study.kind": spec.kind,
        "search.algorithm": search.algorithm,
        "search.seeds": ",".join(map(str, search.seeds or [])),
        "search.max_concurrent_trials": search.max_concurrent_trials or "as resources allow",
        "scheduler.type": spec.scheduler.type,
        "objectives": ",".join(f"{o.metric}:{o.mode}" for o in spec.objectives),
        "budget.trials": planned,
    }
    if spec.space:
        params["space"] = ",".join(spec.space)
    params.update(PARENT_RUNS[spec.kind].params(spec))
    return {k: str(v) for k, v in params.items()}


def sampler_params(spec: Any) -> dict[str, Any]:
    """A sampled search: how many points, from which seed."""
    search = spec.search
    if search.algorithm == "grid":
        return {}
    return {"search.num_samples": search.num_samples, "search.sampler_seed": search.sampler_seed}


def arm_params(spec: Any) -> dict[str, Any]:
    """A comparison: its sampler's params, its arms by display name and its final seeds."""
    keys = list(spec.arms or {})
    values = [spec.arms[k] for k in keys]
    arms = ", ".join(
        layout.arm_display(layout.arm_key(dict(zip(keys, combo, strict=True))))
        for combo in itertools.product(*values)
    )
    final = ",".join(map(str, spec.final.seeds if spec.final else []))
    return {**sampler_params(spec), "arms": arms, "final.seeds": final}


def nothing(*_: Any) -> dict:
    """A kind whose parent run records only what every study's does (a benchmark: no ranking)."""
    return {}


def log_study_params(client, run_id: str, params: Mapping[str, str]) -> None:
    """The params the parent does not have yet: MLflow refuses to change a param, and a resumed
    execution recorded before a param existed gets it now."""
    have = client.get_run(run_id).data.params
    store.log_params(client, run_id, {k: v for k, v in params.items() if k not in have})


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _complete(run) -> bool:
    tags = run.data.tags
    return tags.get(layout.STATUS) == "FINISHED" and tags.get(layout.STOPPED_EARLY) != "true"


def _seed_means(runs: Iterable, metrics: list[str]) -> list[tuple[str, int, dict[str, float]]]:
    """(config key, n seeds, {metric: mean}) per configuration; a metric only where every seed has it."""
    groups: dict[str, list] = {}
    for run in runs:
        groups.setdefault(
            run.data.tags.get(layout.CONFIG_KEY) or run.info.run_name or run.info.run_id, []
        ).append(run)
    out = []
    for key, members in groups.items():
        means = {}
        for metric in metrics:
            values = [layout.run_values(m.data.metrics, m.data.params).get(metric) for m in members]
            if all(_finite(v) for v in values):
                means[metric] = sum(values) / len(values)
        out.append((key, len(members), means))
    return out


def _best(groups: list[tuple[str, int, dict[str, float]]], objective: str, mode: str):
    sign = 1.0 if mode == "max" else -1.0
    scored = [g for g in groups if objective in g[2]]
    return max(scored, key=lambda g: (sign * g[2][objective], g[1])) if scored else None


def _best_metrics(group, objective: str, test: str | None) -> dict[str, float]:
    """best_val_top1, best_test_top1, best_n_seeds of the best configuration."""
    _, n, means = group
    out = {f"best_{metric}": means[metric] for metric in (objective, test) if metric in means}
    return {**out, "best_n_seeds": float(n)}


def _arm_metrics(arm: str, group, objective: str, test: str | None) -> dict[str, float]:
    """arm/<arm>/val_top1_mean, arm/<arm>/test_top1_mean, arm/<arm>/n of an arm's configuration."""
    _, n, means = group
    prefix = f"arm/{arm_metric_label(arm)}/"
    out = {f"{prefix}{metric}_mean": means[metric] for metric in (objective, test) if metric in means}
    return {**out, f"{prefix}n": float(n)}


def rank_transfer_metrics(arm: str, rho: float | None, n: int) -> dict[str, float]:
    """arm/<arm>/rank_transfer_rho (where defined) and arm/<arm>/rank_transfer_n of an arm whose
    low-fidelity top points were confirmed at full fidelity."""
    prefix = f"arm/{arm_metric_label(arm)}/"
    out = {f"{prefix}{layout.RANK_TRANSFER_N}": float(n)}
    if rho is not None:
        out[f"{prefix}{layout.RANK_TRANSFER_RHO}"] = float(rho)
    return out


def counts(runs: list, planned: int) -> dict[str, float]:
    """trials_planned / finished (every epoch) / stopped_early / failed / killed, by STATUS tag."""
    out = dict.fromkeys(("trials_finished", "trials_stopped_early", "trials_failed", "trials_killed"), 0.0)
    for run in runs:
        status = run.data.tags.get(layout.STATUS, run.info.status)
        if status == "FINISHED":
            out["trials_finished" if _complete(run) else "trials_stopped_early"] += 1
        elif status in ("FAILED", "KILLED"):
            out[f"trials_{status.lower()}"] += 1
    return {"trials_planned": float(planned), **out}


def summary_metrics(runs: list, *, kind: str, objective: str, mode: str, planned: int) -> dict[str, float]:
    """The parent's metrics from its child runs (see the module docstring): the counts, then its
    kind's (`ParentRun.metrics`); `kind` names a study kind."""
    return {**counts(runs, planned), **PARENT_RUNS[kind].metrics(runs, objective, mode)}


def _wanted(objective: str) -> tuple[list[str], str | None]:
    test = test_metric(objective)
    return [objective] + ([test] if test else []), test


def best_metrics(runs: list, objective: str, mode: str) -> dict[str, float]:
    """A train study: the best configuration overall, and each arm's (mixer x regime, where there
    are several) from its best configuration."""
    wanted, test = _wanted(objective)
    complete = [r for r in runs if _complete(r)]
    by_arm: dict[str, list] = {}
    for run in complete:
        by_arm.setdefault(layout.train_arm(run.data.params), []).append(run)
    arm_bests = {arm: _best(_seed_means(members, wanted), objective, mode) for arm, members in by_arm.items()}
    if len(arm_bests) < 2:
        arm_bests = {}  # one arm: `best_*` says it all
    out: dict[str, float] = {}
    overall = _best(_seed_means(complete, wanted), objective, mode)
    if overall is not None:
        out.update(_best_metrics(overall, objective, test))
    for arm, best in arm_bests.items():
        if best is not None:
            out.update(_arm_metrics(arm, best, objective, test))
    return out


def final_arm_metrics(runs: list, objective: str, mode: str) -> dict[str, float]:
    """A comparison: each arm from its final runs, its tuned configuration's seed mean in tuning,
    and the best arm by its final runs."""
    wanted, test = _wanted(objective)
    complete = [r for r in runs if _complete(r)]
    out: dict[str, float] = {}
    by_arm: dict[str, list] = {}
    for run in complete:
        if run.data.tags.get(layout.PHASE) == "final":
            by_arm.setdefault(run.data.tags.get(layout.ARM, ""), []).append(run)
    arm_bests = {arm: _best(_seed_means(members, wanted), objective, mode) for arm, members in by_arm.items()}
    tuning: dict[str, list] = {}
    for run in complete:
        if run.data.tags.get(layout.PHASE) == "tune":
            tuning.setdefault(run.data.tags.get(layout.ARM, ""), []).append(run)
    for arm, members in tuning.items():
        best = _best(_seed_means(members, [objective]), objective, mode)
        if best is not None:
            out[f"arm/{arm_metric_label(arm)}/tuning_{objective}"] = best[2][objective]
    for arm, best in arm_bests.items():
        if best is not None:
            out.update(_arm_metrics(arm, best, objective, test))
    overall = _best([b for b in arm_bests.values() if b is not None], objective, mode)
    if overall is not None:
        out.update(_best_metrics(overall, objective, test))
    return out


@dataclass(frozen=True)
class ParentRun:
    """What a study kind's parent run records beyond every study's params and counts."""

    params: Callable[[Any], dict[str, Any]]  # spec -> more params
    metrics: Callable[[list, str, str], dict[str, float]]  # (child runs, objective, mode) -> more metrics
    model_runs: bool = True  # its trials train a model (one to log, register and show metrics of)
    arm_phases: bool = False  # its runs carry phase and arm tags (a comparison's)


PARENT_RUNS: KindTable[ParentRun] = KindTable(
    "parent-run summary (vitscale.tracking.parent_summary.ParentRun)",
    "vitscale.tracking.parent_summary.PARENT_RUNS.register(name, ParentRun(...))",
)
PARENT_RUNS.register("train", ParentRun(params=sampler_params, metrics=best_metrics))
PARENT_RUNS.register(
    "benchmark", ParentRun(params=nothing, metrics=nothing, model_runs=False)
)  # fronts per resolution
PARENT_RUNS.register("comparison", ParentRun(params=arm_params, metrics=final_arm_metrics, arm_phases=True))


def log_summary(client, experiment_id: str, parent_run_id: str, spec: Any) -> dict[str, float]:
    """Read the parent's child runs from MLflow, log its summary metrics; return them. The planned
    count is the parent's PLANNED_TRIALS tag (set when the execution started)."""
    planned = int(client.get_run(parent_run_id).data.tags.get(layout.PLANNED_TRIALS) or 0)
    runs = store.search_all(client, [experiment_id], f"tags.`{layout.PARENT_RUN_ID}` = '{parent_run_id}'")
    objective = spec.objectives[0]
    metrics = summary_metrics(
        runs, kind=spec.kind, objective=objective.metric, mode=objective.mode, planned=planned
    )
    store.log_metrics(client, parent_run_id, metrics, step=0)
    return metrics


def parent_end_time(client, run_id: str) -> int | None:
    """The parent's end time when it is FINISHED (a resume reads it first), else None."""
    info = client.get_run(run_id).info
    return info.end_time if info.status == "FINISHED" else None


def keep_end_time(client, experiment_id: str, parent_run_id: str, end_time: int | None) -> None:
    """A resume of a finished execution that ran nothing leaves the parent's end time as it was:
    the study's duration is the time its trials took, not the time until someone looked again."""
    if end_time is None:
        return
    runs = store.search_all(client, [experiment_id], f"tags.`{layout.PARENT_RUN_ID}` = '{parent_run_id}'")
    if any(r.info.end_time is None or r.info.end_time > end_time for r in runs):
        return  # something ran (or still runs): the end time moved with it
    client.set_terminated(parent_run_id, "FINISHED", end_time=end_time)
