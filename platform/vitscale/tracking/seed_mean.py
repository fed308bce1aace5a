"""What "best" means in every summary a study prints: a configuration's mean over its seeds, with n.

One seed of one configuration is a draw, not a result: the end-of-run summary, the live progress
line and `study status` all rank configurations by the mean of the objective over their replicate
seeds (finished runs that ran every epoch; failures and early stops are counted elsewhere, never
averaged in), and always say over how many seeds. Several objectives give the Pareto set of those
means, one set per resolution: a 32 px configuration never competes with a 64 px one. It sits in
`tracking`, below `tune` and beside the parent run's summary metrics, so every reader of a study's
runs can share it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vitscale.pareto import pareto_mask
from vitscale.tracking import layout

LABEL_WIDTH = 60  # characters of a configuration's name in one line of progress


@dataclass
class Replicate:
    """One finished seed of one configuration: its group key, name, resolution and metrics."""

    key: str
    label: str
    metrics: Mapping[str, float]
    resolution: Any = None


@dataclass
class ConfigMean:
    """A configuration's seed means: n seeds, the mean of every metric all of them report."""

    key: str
    label: str
    n: int
    means: dict[str, float] = field(default_factory=dict)
    resolution: Any = None


def config_label(values: Mapping[str, Any], width: int = LABEL_WIDTH) -> str:
    """A configuration for people, named as its runs are (`layout.run_name` without the seed) from
    the values that tell it apart: 'ssog · ode · w64'; nested sections flattened, unset values left
    out, cut to `width` characters."""
    shown = {k: v for k, v in _flat(values).items() if v is not None and v != ""}
    text = layout.run_name(shown)
    return text if len(text) <= width else text[: width - 1] + "…"


def _flat(values: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in values.items():
        if isinstance(value, Mapping):
            out.update(_flat(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def seed_means(replicates: Iterable[Replicate]) -> list[ConfigMean]:
    """Replicates grouped by configuration, in order of first appearance; a metric is averaged
    only where every seed of the group has a finite value of it."""
    groups: dict[str, list[Replicate]] = {}
    for replicate in replicates:
        groups.setdefault(replicate.key, []).append(replicate)
    out = []
    for key, members in groups.items():
        names = set.intersection(*(set(m.metrics) for m in members))
        means = {}
        for name in sorted(names):
            values = [m.metrics[name] for m in members]
            if all(_finite(v) for v in values):
                # numpy's sum for a handful of seeds, in a fraction of np.mean's time: the progress
                # line averages every finished configuration at each change of a study
                means[name] = float(sum(values) / len(values))
        out.append(ConfigMean(key, members[0].label, len(members), means, members[0].resolution))
    return out


def best_configs(configs: list[ConfigMean], objectives: list[tuple[str, str]]) -> list[ConfigMean]:
    """The best configuration by seed mean (one objective), or the Pareto set of seed means
    (several), among those with every objective; ties on the mean go to more seeds."""
    candidates = [c for c in configs if all(m in c.means for m, _ in objectives)]
    if not candidates:
        return []
    if len(objectives) == 1:
        metric, mode = objectives[0]
        sign = 1.0 if mode == "max" else -1.0
        return [max(candidates, key=lambda c: (sign * c.means[metric], c.n))]
    points = np.array([[c.means[m] for m, _ in objectives] for c in candidates], dtype=float)
    mask = pareto_mask(points, [mode == "max" for _, mode in objectives])
    return [c for c, keep in zip(candidates, mask, strict=True) if keep]


def best_per_resolution(
    configs: list[ConfigMean], objectives: list[tuple[str, str]]
) -> dict[Any, list[ConfigMean]]:
    """`best_configs` within each resolution, smallest first (one entry, key None, where no
    configuration names its resolution)."""
    by_resolution: dict[Any, list[ConfigMean]] = {}
    for config in configs:
        by_resolution.setdefault(config.resolution, []).append(config)
    ordered = sorted(by_resolution, key=lambda r: (r is None, _number(r)))
    return {r: best for r in ordered if (best := best_configs(by_resolution[r], objectives))}


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return math.inf


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
