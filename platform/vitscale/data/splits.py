"""Deterministic index selections: stratified train/val split and class-balanced caps.

Both are pure functions of (labels, seed), so a trial's data are reproducible from its config.
"""

from __future__ import annotations

import torch


def _class_ranks(labels: torch.Tensor, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A seeded permutation and, for each permuted sample, its rank among its own class."""
    gen = torch.Generator().manual_seed(seed)
    perm = torch.randperm(labels.numel(), generator=gen)
    permuted = labels[perm]
    order = torch.argsort(permuted, stable=True)  # groups classes, keeps permuted order inside
    sorted_labels = permuted[order]
    starts = torch.searchsorted(sorted_labels, sorted_labels, side="left")
    ranks = torch.empty_like(order)
    ranks[order] = torch.arange(order.numel()) - starts
    return perm, ranks


def stratified_split(
    labels: torch.Tensor, val_fraction: float, seed: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(train_idx, val_idx): each class contributes round(val_fraction * count) to val (>= 1 if count >= 2)."""
    labels = labels.cpu()
    perm, ranks = _class_ranks(labels, seed)
    counts = torch.bincount(labels)
    n_val = torch.round(counts.double() * val_fraction).long()
    n_val = torch.where(counts >= 2, n_val.clamp(1, None), torch.zeros_like(n_val))
    n_val = torch.minimum(n_val, (counts - 1).clamp(0, None))  # every class keeps a training sample
    is_val = ranks < n_val[labels[perm]]
    return perm[~is_val].sort().values, perm[is_val].sort().values


def balanced_subset(labels: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """Indices of n samples with classes as balanced as the data allow (round-robin over classes)."""
    labels = labels.cpu()
    if n >= labels.numel():
        return torch.arange(labels.numel())
    perm, ranks = _class_ranks(labels, seed)
    # Sort by (rank within class, label): the first n take every class's 1st, then 2nd, ...
    key = ranks * (int(labels.max()) + 1) + labels[perm]
    return perm[torch.argsort(key, stable=True)[:n]].sort().values
