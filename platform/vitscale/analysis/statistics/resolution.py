"""Accuracy against the evaluation resolution, and the accuracy–throughput front over resolutions.

A trial with `train.eval_resolutions` (or a run `vitscale evaluate` reached) carries test top-1 at
each evaluated side R (`test_top1_at<R>`, patch size fixed: more tokens) and its per-image
predictions there (`test@R`). Per arm and R this gives the test top-1 (mean ± 95 % t over seeds,
validation beside it) and, against the arm's reference, the paired Δ at R judged exactly as the
headline verdicts are (analysis.statistics.contest: seeds × test images bootstrap and seed-paired t, both
must pass; Holm over every (arm, R) comparison of this table, a family of its own).

The front: each (arm, R) at its test top-1 and the inference images/s its model configuration
measured at R in a benchmark study of the same model (`analysis.throughput_from`). A point is on
the front when no other point has both more accuracy and more throughput: which mixer, trained
how, evaluated at which resolution, gives the most accuracy per image per second. Throughput is
of untrained models of the same shape (weights do not change the cost); a configuration the
benchmark did not measure has no throughput and stays off the front.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import measured_backend
from vitscale.analysis.load.outcomes import scored
from vitscale.analysis.load.throughput import MODEL_SHAPE, throughput_key
from vitscale.analysis.statistics.aggregate import mean_ci
from vitscale.analysis.statistics.arms import Arm, reference_of
from vitscale.analysis.statistics.contest import N_RESAMPLES, Judgement, Pair, judge
from vitscale.analysis.statistics.fronts import pareto_indices
from vitscale.analysis.statistics.paired import by_seed
from vitscale.analysis.statistics.verdicts import images_by_seed, lost_runs_rule, paired_images
from vitscale.train.metrics import at_resolution

AT_RESOLUTION = re.compile(r"^test_top1_at(\d+)$")


@dataclass
class ResolutionPoint:
    """One arm evaluated at one resolution: its accuracy, its Δ against the reference arm at the
    same resolution, and its measured throughput there."""

    arm: str
    mixer: str | None
    regime: str | None
    trained: str  # the sides it was trained at: '28', or '28+44+56' (data.train_resolutions)
    resolution: int
    tokens: int | None
    test: tuple[float, float, int]  # mean, ci95 half-width, seeds
    val: tuple[float, float, int]
    reference: str | None = None
    judgement: Judgement | None = None
    verdict: str = ""
    throughput: float | None = None
    on_front: bool = False
    per_seed: dict = field(default_factory=dict, repr=False)


def eval_resolutions(table: pa.Table) -> list[int]:
    """The sides some run was evaluated at, ascending."""
    return sorted({int(m.group(1)) for c in table.column_names if (m := AT_RESOLUTION.match(c))})


def _first(table: pa.Table, column: str, rows: list[int]):
    if column not in table.column_names or not rows:
        return None
    return table.column(column)[rows[0]].as_py()


def resolution_points(
    arms: list[Arm],
    reference: dict,
    table: pa.Table,
    predictions: pa.Table,
    policy: str,
    margin: float,
    throughput: dict[tuple, float] | None = None,
    seed: int = 0,
    n_resamples: int = N_RESAMPLES,
) -> list[ResolutionPoint]:
    """Every (arm, evaluated resolution) with a finite test top-1 in at least one seed."""
    seeds = table.column("seed").to_pylist()
    points: dict[tuple[str, int], ResolutionPoint] = {}
    images: dict[int, dict] = {}
    for r in eval_resolutions(table):
        test, val = (scored(table, at_resolution(m, r), policy) for m in ("test_top1", "val_top1"))
        for arm in arms:
            per_seed = by_seed([seeds[i] for i in arm.rows], test[arm.rows])
            if not per_seed:
                continue
            val_seed = by_seed([seeds[i] for i in arm.rows], val[arm.rows])
            patch = _first(table, "patch_size", arm.rows)
            points[(arm.label, r)] = ResolutionPoint(
                arm.label,
                _first(table, "mixer", arm.rows),
                _first(table, "regime", arm.rows),
                _trained(table, arm.rows),
                r,
                (r // patch) ** 2 if isinstance(patch, int) and patch else None,
                _stats(per_seed),
                _stats(val_seed),
                per_seed=per_seed,
            )
        metric = at_resolution("test_top1", r)
        images[r] = images_by_seed(arms, table, predictions, policy, metric=metric, split=f"test@{r}")
    _judge(points, arms, reference, images, policy, margin, seed, n_resamples)
    _place(points, arms, table, throughput or {})
    return list(points.values())


def _trained(table: pa.Table, rows: list[int]) -> str:
    sides = _first(table, "data.train_resolutions", rows)
    if isinstance(sides, str):  # MLflow params are strings: '[28, 44, 56]'
        sides = re.findall(r"\d+", sides)
    if sides:
        return "+".join(str(int(s)) for s in sides)
    return str(_first(table, "resolution", rows))


def _stats(per_seed: dict) -> tuple[float, float, int]:
    mean, _, half, n = mean_ci(np.array(list(per_seed.values()), dtype=float))
    return mean, half, n


def _judge(points, arms, reference, images, policy, margin, seed, n_resamples) -> None:
    """Each non-reference arm against its reference at the same resolution; one Holm family."""
    by_label = {a.label: a for a in arms}
    pairs = []
    for (label, r), point in points.items():
        ref = reference_of(by_label[label], arms, reference)
        if ref is None or (ref.label, r) not in points:
            continue
        point.reference = ref.label
        shared = paired_images(images[r][label], images[r][ref.label])
        pairs.append((point, Pair(point.per_seed, points[(ref.label, r)].per_seed, shared)))
    judged = judge([p for _, p in pairs], margin, n_resamples=n_resamples, seed=seed)
    for (point, _), j in zip(pairs, judged, strict=True):
        point.judgement = j
        point.verdict = lost_runs_rule(j.verdict, by_label[point.arm], by_label[point.reference], policy)


def _place(points, arms, table: pa.Table, throughput: dict[tuple, float]) -> None:
    """Throughput at each point's resolution, then the Pareto set (max accuracy, max images/s)."""
    by_label = {a.label: a for a in arms}
    for (label, r), point in points.items():
        rows = by_label[label].rows
        mixer, regime, backend = (_first(table, c, rows) for c in ("mixer", "regime", "backend"))
        backend = measured_backend(mixer, backend)  # e.g. what `auto` runs at a benchmark's precision
        shape = [_first(table, c, rows) for c in MODEL_SHAPE]
        point.throughput = throughput.get(throughput_key(mixer, regime, backend, r, *shape))
    placed = [p for p in points.values() if p.throughput is not None and math.isfinite(p.test[0])]
    if not placed:
        return
    data = {"acc": np.array([p.test[0] for p in placed]), "thr": np.array([p.throughput for p in placed])}
    for i in pareto_indices(data, [("acc", "max"), ("thr", "max")]):
        placed[int(i)].on_front = True
