"""`pareto_mask`: the non-dominated rows of a finite array, each column maximised or minimised.

Plain numpy, no vitscale imports: the bottom layer, so tracking (the checkpoints of the best
configurations), tune (the study summary) and analysis (the tables of
`analysis.statistics.fronts`) share one definition. Point p dominates q when p is at least as good
on every column and strictly better on one; identical points never dominate each other. Two
columns run in O(n log n) (sort and sweep); more use blocked pairwise tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def pareto_mask(values: np.ndarray, maximize: Sequence[bool]) -> np.ndarray:
    """Boolean mask of the non-dominated rows of a finite (n, k) array; `maximize[j]` per column."""
    v = np.asarray(values, dtype=float)
    if v.ndim != 2 or v.shape[1] != len(maximize):
        raise ValueError(f"values must be (n, {len(maximize)}), got {v.shape}")
    v = np.where(np.asarray(maximize, dtype=bool), -v, v)  # everything minimised from here on
    n, k = v.shape
    if n == 0:
        return np.zeros(0, dtype=bool)
    if k == 1:
        return v[:, 0] == v[:, 0].min()
    if k == 2:
        return _front_2d(v[:, 0], v[:, 1])
    return _front_nd(v)


def _front_2d(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Sort by (x, y); a point survives if it has its x-group's smallest y and beats every smaller x."""
    order = np.lexsort((y, x))
    xs, ys = x[order], y[order]
    starts = np.flatnonzero(np.r_[True, xs[1:] != xs[:-1]])
    group = np.cumsum(np.r_[True, xs[1:] != xs[:-1]]) - 1
    group_min = ys[starts]  # sorted by y inside a group
    best_before = np.r_[np.inf, np.minimum.accumulate(group_min)[:-1]]  # over strictly smaller x
    keep = (ys == group_min[group]) & (group_min[group] < best_before[group])
    mask = np.zeros(x.size, dtype=bool)
    mask[order] = keep
    return mask


def _front_nd(v: np.ndarray, block: int = 512) -> np.ndarray:
    dominated = np.zeros(v.shape[0], dtype=bool)
    for start in range(0, v.shape[0], block):
        q = v[start : start + block, None, :]  # candidates, (b, 1, k)
        le = (v[None, :, :] <= q).all(axis=2)  # every other point no worse ...
        lt = (v[None, :, :] < q).any(axis=2)  # ... and better somewhere
        dominated[start : start + block] = (le & lt).any(axis=1)
    return ~dominated
