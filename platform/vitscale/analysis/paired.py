"""Seed-paired differences between two arms: Δ_s = candidate_s − reference_s over the seeds both
arms have a value for, with the 95 % Student-t interval of the mean Δ.

Pairing removes the seed-to-seed variation both arms share (same data split, same init stream),
so the interval is the one of the difference itself, not of two independent means.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from vitscale.analysis.aggregate import mean_ci


@dataclass
class PairedDelta:
    """Mean Δ with its CI half-width over `n` paired seeds (the seeds are listed, sorted)."""

    mean: float
    ci95: float
    n: int
    seeds: list


def by_seed(seeds: list, values: np.ndarray) -> dict:
    """{seed: value}; several finite values of one seed are averaged, NaN values are left out."""
    acc: dict = {}
    for s, v in zip(seeds, values, strict=True):
        if np.isfinite(v):
            acc.setdefault(s, []).append(float(v))
    return {s: float(np.mean(v)) for s, v in acc.items()}


def paired_delta(candidate: dict, reference: dict, level: float = 0.95) -> PairedDelta:
    """Δ = candidate − reference over the seeds present (with a finite value) in both mappings."""
    common = sorted(set(candidate) & set(reference), key=lambda s: (s is None, str(type(s)), s))
    d = np.array([candidate[s] - reference[s] for s in common], dtype=float)
    if d.size == 0:
        return PairedDelta(math.nan, math.nan, 0, [])
    mean, _, half, n = mean_ci(d, level)
    return PairedDelta(mean, half, n, common)
