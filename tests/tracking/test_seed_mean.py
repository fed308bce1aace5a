"""Seed means, the one meaning of "best": a metric averaged only where every seed has it; the Pareto
set of seed means."""

from __future__ import annotations

import math

from vitscale.tracking.seed_mean import ConfigMean, Replicate, best_configs, best_per_resolution, seed_means


def test_seed_means_average_only_metrics_every_seed_has():
    means = seed_means(
        [
            Replicate("a", "a", {"val_top1": 0.5, "test_top1": 0.4}),
            Replicate("a", "a", {"val_top1": 0.7}),
            Replicate("b", "b", {"val_top1": math.nan}),
        ]
    )
    assert [(m.key, m.n, m.means) for m in means] == [("a", 2, {"val_top1": 0.6}), ("b", 1, {})]
    assert [c.key for c in best_configs(means, [("val_top1", "max")])] == ["a"]


def test_pareto_sets_of_seed_means_skip_configurations_without_every_objective():
    configs = [
        ConfigMean("a", "a", 2, {"val_top1": 0.9, "params": 100.0}),
        ConfigMean("b", "b", 2, {"val_top1": 0.8, "params": 50.0}),
        ConfigMean("c", "c", 2, {"val_top1": 0.7, "params": 80.0}),  # dominated by b
        ConfigMean("d", "d", 1, {"params": 10.0}),  # failed: no val_top1
    ]
    best = best_per_resolution(configs, [("val_top1", "max"), ("params", "min")])
    assert [c.key for c in best[None]] == ["a", "b"]
