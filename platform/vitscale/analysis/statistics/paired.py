"""Seed-paired differences between two arms: Δ_s = candidate_s − reference_s over the seeds both
arms have a value for, with the 95 % Student-t interval of the mean Δ.

Pairing removes the seed-to-seed variation both arms share (same data split, same init stream),
so the interval is the one of the difference itself, not of two independent means. Below
MIN_VERDICT_SEEDS pairs there is no interval: with 2, one seed's luck decides and the t-interval is
12.7 standard errors wide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vitscale.analysis.statistics.aggregate import mean_ci

MIN_VERDICT_SEEDS = 3  # the fewest paired seeds that give a t-interval (and a seed-based verdict)


@dataclass
class PairedDelta:
    """Mean Δ with its CI half-width and standard error over `n` paired seeds (listed, sorted)."""

    mean: float
    ci95: float
    n: int
    seeds: list
    se: float = math.nan  # std of the differences / sqrt(n); NaN below 2 pairs


def by_seed(seeds: list, values: np.ndarray) -> dict:
    """{seed: value}; several finite values of one seed are averaged, NaN values are left out."""
    acc: dict = {}
    for s, v in zip(seeds, values, strict=True):
        if np.isfinite(v):
            acc.setdefault(s, []).append(float(v))
    return {s: float(np.mean(v)) for s, v in acc.items()}


def paired_delta(candidate: dict, reference: dict, level: float = 0.95) -> PairedDelta:
    """Δ = candidate − reference over the seeds present (with a finite value) in both mappings;
    the interval is NaN below MIN_VERDICT_SEEDS pairs."""
    common = sorted(set(candidate) & set(reference), key=seed_order)
    d = np.array([candidate[s] - reference[s] for s in common], dtype=float)
    if d.size == 0:
        return PairedDelta(math.nan, math.nan, 0, [])
    mean, std, half, n = mean_ci(d, level)
    return PairedDelta(mean, half if n >= MIN_VERDICT_SEEDS else math.nan, n, common, std / math.sqrt(n))


def seed_order(seed) -> tuple:
    """Sort key for seeds of any type (ints, strings, None last)."""
    return (seed is None, str(type(seed)), seed)
