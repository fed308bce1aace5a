"""A search's budget in compute: `search.budget: {train_flops: F}` or `{core_hours: H}`.

Arms of different cost tuned with the same number of points get different compute (an ODE arm
costs several discrete ones). With a compute budget a search draws points until its trials have
spent the budget; the trials then running finish (their points' seeds included), so the spent
amount ends a little above the budget, by at most what the running trials add. Each comparison
arm tunes in its own Tune experiment, so each arm's search spends its own budget.

What a trial has spent, from its latest result (both cumulative, both continue from a checkpoint):
- `train_flops`: the trainer's running total of forward + backward FLOPs (`train.cost`);
- `core_hours`: Tune's `time_total_s` (the trial's wall time) x `resources.cpu`, in hours.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from vitscale.tracking import layout, store
from vitscale.tracking.parent_summary import arm_metric_label


def _train_flops(result: dict, cpus: float) -> float | None:
    return result.get("train_flops")


def _core_hours(result: dict, cpus: float) -> float | None:
    seconds = result.get("time_total_s")
    return None if seconds is None else float(seconds) * cpus / 3600.0


# measure -> (a trial's latest result, its CPUs) -> what it has spent so far (None: not reported)
MEASURES: dict[str, Callable[[dict, float], float | None]] = {
    "train_flops": _train_flops,
    "core_hours": _core_hours,
}


@dataclass
class ComputeBudget:
    """`limit` of `measure` for one search; `observe` every result, `spent_out` before a new point."""

    measure: str
    limit: float
    cpus: float = 1.0
    spent_by_trial: dict[str, float] = field(default_factory=dict)

    def observe(self, trial_id: str, result: dict | None) -> None:
        value = MEASURES[self.measure](result or {}, self.cpus)
        if isinstance(value, int | float) and math.isfinite(value):
            self.spent_by_trial[trial_id] = max(float(value), self.spent_by_trial.get(trial_id, 0.0))

    @property
    def spent(self) -> float:
        return sum(self.spent_by_trial.values())

    def spent_out(self) -> bool:
        return self.spent >= self.limit

    def record(self) -> dict[str, Any]:
        """What comparison.json and the run's summary say of it."""
        return {"measure": self.measure, "limit": self.limit, "spent": self.spent}


def budget_of(spec) -> ComputeBudget | None:
    """The spec's compute budget, or None (no budget, or one in trials: num_samples holds it)."""
    budget = spec.search.budget
    compute = budget.compute if budget is not None else None
    if compute is None:
        return None
    measure, limit = compute
    return ComputeBudget(measure, limit, cpus=spec.resources.cpu)


def spent_by_results(spec, results: Iterable[dict]) -> dict[str, Any] | None:
    """The spent budget of a finished search, from its trials' last results (a resumed search's
    searcher may have seen only some of them; the results hold every trial)."""
    budget = budget_of(spec)
    if budget is None:
        return None
    for i, result in enumerate(results):
        budget.observe(str(result.get("trial_id", i)), result)
    return {**budget.record(), "trials": len(budget.spent_by_trial)}


def describe(record: dict[str, Any]) -> str:
    """'spent 1.02e+12 of 1e+12 train_flops over 9 trials'."""
    return (
        f"spent {record['spent']:.3g} of {record['limit']:.3g} {record['measure']}"
        f" over {record.get('trials', '?')} trials"
    )


def report_spent(client, execution, spec, results, arm: str = "") -> dict[str, Any] | None:
    """After a search with a compute budget: what it spent, printed as one line and logged on the
    parent run (`budget_spent`, `budget_limit`; a comparison arm's as `arm/<arm>/budget_spent`),
    returned for comparison.json. None without a compute budget."""
    record = spent_by_results(spec, [r.metrics for r in results if r.metrics])
    if record is None:
        return None
    prefix = f"arm/{arm_metric_label(arm)}/" if arm else ""
    metrics = {f"{prefix}budget_spent": record["spent"], f"{prefix}budget_limit": record["limit"]}
    store.log_metrics(client, execution.parent_run_id, metrics, step=0)
    where = f" arm {layout.arm_display(arm)}" if arm else ""
    print(f"[{execution.spec.name}]{where}: {describe(record)}", flush=True)
    return record
