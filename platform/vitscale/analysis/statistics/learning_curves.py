"""Each arm's learning curve: validation and test top-1 against images seen, per finished run (seed)
and their mean over seeds, with the arm's convergence mark and budget.

An arm's runs are its finished runs (a comparison: the final phase, the numbers its verdicts
read). Seeds are aligned by epoch: the mean at an epoch is over the seeds that evaluated it, so an
epoch no run evaluated (`train.eval_every`) is no point. x is images seen; where a run logged no
`images_seen` (older trainers) the arm's x is the epoch instead (`x_unit`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.statistics.arms import Arm
from vitscale.analysis.statistics.budget import Budget, arm_budget
from vitscale.analysis.statistics.convergence import Convergence, judge_convergence
from vitscale.tracking.layout import CURVE_TEST_TOP1

IMAGES, EPOCHS = "images", "epochs"


@dataclass(frozen=True)
class RunCurve:
    """One finished run's points: epoch, images seen (NaN where not logged), val and test top-1."""

    run_id: str
    seed: object
    epoch: np.ndarray
    images: np.ndarray
    val: np.ndarray
    test: np.ndarray


@dataclass
class ArmCurve:
    label: str  # the arm's label (a comparison: its ARM tag)
    key: dict[str, str]  # the arm's values (`Arm.key`): which figure and which line
    x_unit: str  # IMAGES | EPOCHS
    epoch: np.ndarray  # the evaluated epochs of the mean curve
    x: np.ndarray  # mean images seen (or the epoch) at each
    val: np.ndarray  # mean validation top-1 at each (NaN where no seed evaluated it)
    test: np.ndarray  # mean test top-1 (`curve_test_top1`) at each, NaN where none logged
    runs: list[RunCurve]
    convergence: Convergence
    budget: Budget
    seeds_missing: int = 0  # finished runs with no history (an older snapshot)

    @property
    def has_test(self) -> bool:
        return bool(np.isfinite(self.test).any())

    def run_x(self, run: RunCurve) -> np.ndarray:
        return run.images if self.x_unit == IMAGES else run.epoch.astype(float)


def _run_curves(curves: pa.Table, run_ids: list[str], seeds: list) -> list[RunCurve]:
    ids = curves.column("run_id").to_pylist()
    epoch = curves.column("epoch").to_numpy()
    cols = {m: as_float(curves.column(m)) for m in ("images_seen", "val_top1", CURVE_TEST_TOP1)}
    rows: dict[str, list[int]] = {}
    for i, run_id in enumerate(ids):
        rows.setdefault(run_id, []).append(i)
    out = []
    for run_id, seed in zip(run_ids, seeds, strict=True):
        r = sorted(rows.get(run_id, []), key=lambda i: epoch[i])
        if r:
            out.append(
                RunCurve(
                    run_id,
                    seed,
                    epoch[r],
                    cols["images_seen"][r],
                    cols["val_top1"][r],
                    cols[CURVE_TEST_TOP1][r],
                )
            )
    return out


def _mean_by_epoch(runs: list[RunCurve], epochs: np.ndarray, values) -> np.ndarray:
    """Per epoch, the mean of `values(run)` over the runs with a finite value there (NaN if none)."""
    out = np.full(epochs.size, np.nan)
    for k, e in enumerate(epochs):
        got = np.array([v for run in runs for v in values(run)[run.epoch == e]], dtype=float)
        got = got[np.isfinite(got)]
        if got.size:
            out[k] = got.mean()
    return out


def arm_curve(arm: Arm, table: pa.Table, curves: pa.Table, threshold: float) -> ArmCurve:
    """The curve, mark and budget of `arm` from its finished runs' histories (`curves`: load.curves)."""
    used = table.column("used").to_pylist()
    finished = [i for i in arm.rows if used[i]]
    run_ids, seeds = table.column("run_id").to_pylist(), table.column("seed").to_pylist()
    runs = _run_curves(curves, [run_ids[i] for i in finished], [seeds[i] for i in finished])
    evaluated = [r for r in runs if np.isfinite(r.val).any()]
    epochs = (
        np.unique(np.concatenate([r.epoch[np.isfinite(r.val)] for r in evaluated]))
        if evaluated
        else np.array([])
    )
    val = _mean_by_epoch(evaluated, epochs, lambda r: r.val)
    test = _mean_by_epoch(evaluated, epochs, lambda r: r.test)
    images_known = all(np.isfinite(r.images[np.isfinite(r.val)]).all() for r in evaluated)
    x_unit = IMAGES if images_known else EPOCHS
    x = _mean_by_epoch(evaluated, epochs, lambda r: r.images) if images_known else epochs.astype(float)
    convergence = judge_convergence(x, val, threshold)
    if not finished:
        convergence = Convergence(convergence.mark, convergence.gain, 0, "no finished run")
    elif not evaluated:
        convergence = Convergence(convergence.mark, convergence.gain, 0, "no per-epoch history read")
    return ArmCurve(
        label=arm.label,
        key=dict(arm.key),
        x_unit=x_unit,
        epoch=epochs,
        x=x,
        val=val,
        test=test,
        runs=evaluated,
        convergence=convergence,
        budget=arm_budget(table, finished),
        seeds_missing=len(finished) - len(evaluated),
    )


def arm_curves(arms: list[Arm], table: pa.Table, curves: pa.Table, threshold: float) -> list[ArmCurve]:
    """Every arm's curve, in the arms' order."""
    return [arm_curve(arm, table, curves, threshold) for arm in arms]


def curve_run_ids(arms: list[Arm], table: pa.Table) -> list[str]:
    """The finished runs of the arms, sorted: whose histories `arm_curves` reads."""
    used, ids = table.column("used").to_pylist(), table.column("run_id").to_pylist()
    return sorted({ids[i] for arm in arms for i in arm.rows if used[i]})
