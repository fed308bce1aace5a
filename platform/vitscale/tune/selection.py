"""Each arm's best tuning point, chosen on validation only.

A point's score is the mean of the (single, `val_*`) objective over its tuning seeds. A point
counts only when every seed ran all its planned epochs: a failed, errored or early-stopped
replicate disqualifies it, so failures never win and a point is never judged on fewer seeds
than the others. Test metrics are never read here. An arm tuned at low fidelity is chosen again
from its confirmation runs (`tune.confirmation`), by the same rules.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from vitscale.tracking.tune_callback import RESULT_FAILURE_REASON, RESULT_PLANNED_EPOCHS, RESULT_SCHEDULE


@dataclass
class ArmChoice:
    """One arm's outcome of the tuning phase (saved in the execution and logged to MLflow)."""

    arm: str
    values: dict[str, Any]
    point: dict[str, Any] | None  # the winning point (searched keys only); None: nothing qualified
    score: float | None  # its mean validation objective over the seeds it was chosen on
    tuning_trials: int
    qualified_points: int
    scores: list[dict[str, Any]] = field(default_factory=list)  # every tuning point: mean, seeds, ok
    # Tuned at low fidelity: its top points at full fidelity, ρ (tune.confirmation); else None.
    confirmation: dict[str, Any] | None = None
    edges: list[dict[str, Any]] = field(default_factory=list)  # the point's values at a range's edge
    budget: dict[str, Any] | None = None  # a compute budget: measure, limit, spent, trials (tune.budget)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ArmChoice:
        """A recorded choice (comparison.json) back; a record older than a field has its default."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def ranked(self, mode: str) -> list[dict[str, Any]]:
        """The qualified points, best first (of equals, the earliest)."""
        sign = -1.0 if mode == "max" else 1.0
        qualified = [s for s in self.scores if s["qualified"]]
        return sorted(qualified, key=lambda s: sign * s["mean"])  # stable: equals keep their order


def _complete(result) -> bool:
    metrics = result.metrics or {}
    if result.error is not None or metrics.get(RESULT_FAILURE_REASON):
        return False
    planned, epoch = metrics.get(RESULT_PLANNED_EPOCHS), metrics.get("epoch")
    return planned is not None and epoch is not None and epoch >= planned


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def point_of(config: dict[str, Any], metrics: dict[str, Any]) -> dict[str, Any]:
    """The point a trial ran: its config's, with the schedule it lived (`train.schedule`) when its
    values changed while it trained (a PBT member): re-run, that schedule is replayed."""
    point = dict(config["point"])
    if metrics.get(RESULT_SCHEDULE):
        point["train.schedule"] = json.loads(metrics[RESULT_SCHEDULE])
    return point


def choose(results, arm: str, values: dict[str, Any], seeds: list[int], metric: str, mode: str) -> ArmChoice:
    """The best point of one arm's tuning `results` (a Ray Tune ResultGrid or list of Results)."""
    groups: dict[str, dict[str, Any]] = {}
    total = 0
    for result in results:
        config = result.config or {}
        if "point" not in config:
            continue
        total += 1
        point = point_of(config, result.metrics or {})
        key = json.dumps(point, sort_keys=True, default=str)
        group = groups.setdefault(key, {"point": point, "values": {}, "sample": config.get("sample")})
        value = (result.metrics or {}).get(metric)
        ok = _complete(result) and _finite(value)
        group["values"][config.get("seed")] = float(value) if ok else None
    scores = []
    for group in groups.values():
        got = group["values"]
        ok = set(got) >= set(seeds) and all(got[s] is not None for s in seeds)
        mean = sum(got[s] for s in seeds) / len(seeds) if ok else None
        scores.append(
            {
                "point": group["point"],
                "mean": mean,
                "seeds": len(got),
                "qualified": ok,
                "sample": group["sample"],
            }
        )
    qualified = [s for s in scores if s["qualified"]]
    best = None
    if qualified:
        pick = max if mode == "max" else min
        best = pick(qualified, key=lambda s: s["mean"])  # first of equals: the earliest point
    return ArmChoice(
        arm=arm,
        values=dict(values),
        point=dict(best["point"]) if best else None,
        score=best["mean"] if best else None,
        tuning_trials=total,
        qualified_points=len(qualified),
        scores=scores,
    )
