"""One mixer x regime's finished runs as compute points: N (params), D (training images seen), C
(training FLOPs), test error; and how one bootstrap resample redraws them.

Sources, recorded per group because a fallback misses what the trainer counts (a partial last
batch, the NFE an ODE actually took):
- D = `images_seen` (the trainer's cumulative count; the final value is the total), else
  data.num_train x train.epochs where both are logged; a run with neither is left out (counted).
- C = `train_flops` (cumulative forward + backward, as trained), else 3 x flops_per_image x D
  (backward ≈ 2 x forward).

Bootstrap scheme: runs are resampled with replacement *within each (N, D) cell* (the seeds of one
configuration) when at least half the cells have >= 2 runs ("seeds"; a cell left with one run, a
failed seed, is held fixed and counted in the scheme's name: it adds no spread, so the interval is a
little narrow there), else whole runs across cells ("cases").
Drawn from s seeds, a plain resample has (s−1)/s of the cell's sample variance (two thirds with 3
seeds), and its intervals under-cover; so a drawn run's deviation from its cell's mean log error is
scaled by sqrt(s / (s−1)) (Davison & Hinkley 1997, §3.3, modified residuals), which makes the
resample's variance unbiased; the cell's mean stays where it was.
Why within cells and not whole seeds across cells: a cell's seeds are exchangeable replicates of
one configuration, and resampling inside cells keeps the design, so no resample loses a size or a
data level and is refused for its design rather than its noise; and with the 3-5 seeds a study
has, whole-seed resampling has only C(2s-1, s) distinct resamples (10 for 3 seeds, 35 for 4), too
few for 2.5 / 97.5 percentiles, while within cells the count multiplies over cells. The price: a
correlation between cells through a shared seed (the same data order at every size) is not
carried, which narrows the intervals if such a correlation exists.
Where every run has per-image test predictions, each resample also redraws the test images, one
draw for all runs (they share the test set), and moves each run's error by its error on the drawn
images minus its error on all ("+images", as in fits.py); the logged metric stays the centre.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.statistics.fits import image_matrix

TEST_SPLIT = "test"
BACKWARD_FACTOR = 3.0  # forward + backward ≈ 3 x forward FLOPs per training image
D_SOURCES = ("images_seen", "data.num_train x train.epochs")
C_SOURCES = ("train_flops", "3 x flops_per_image x D")


def _column(runs: pa.Table, name: str) -> np.ndarray:
    return as_float(runs.column(name)) if name in runs.column_names else np.full(runs.num_rows, np.nan)


def _positive(x: np.ndarray) -> np.ndarray:
    return np.isfinite(x) & (x > 0)


def _source_text(first: np.ndarray, names: tuple[str, str]) -> str:
    """'images_seen', 'data.num_train x train.epochs' or 'mixed: 3 of 5 images_seen'."""
    k = int(first.sum())
    if k == first.size:
        return names[0]
    return names[1] if k == 0 else f"mixed: {k} of {first.size} runs {names[0]}, the rest {names[1]}"


@dataclass
class ComputePoints:
    """The group's runs with N, D and C known, and their (N, D) cells."""

    n: np.ndarray
    d: np.ndarray
    c: np.ndarray
    err: np.ndarray
    run_ids: list[str]
    d_source: str
    c_source: str
    n_without: int  # used runs of the group left out: no D, C or test error
    wrong: np.ndarray | None = None  # runs x test images, 1 = misclassified
    image_note: str | None = None  # why the test images are not resampled
    cell_of: np.ndarray = field(init=False, repr=False)  # per run its cell's index
    cell_n: np.ndarray = field(init=False, repr=False)  # per cell N and D
    cell_d: np.ndarray = field(init=False, repr=False)
    cells: list[np.ndarray] = field(init=False, repr=False)  # per cell its runs
    _log_centre: np.ndarray = field(init=False, repr=False)  # per run its cell's mean log error
    _inflate: np.ndarray = field(init=False, repr=False)  # per run sqrt(s / (s - 1)) of its cell

    def __post_init__(self) -> None:
        keys = np.stack([self.n, np.round(self.d)], axis=1)
        cells, inverse = np.unique(keys, axis=0, return_inverse=True)
        self.cell_of = inverse.ravel()
        self.cell_n, self.cell_d = cells[:, 0], cells[:, 1]
        self.cells = [np.flatnonzero(self.cell_of == k) for k in range(len(cells))]
        size = np.array([ix.size for ix in self.cells], dtype=float)
        log_mean = np.bincount(self.cell_of, weights=np.log(self.err)) / size
        self._log_centre = log_mean[self.cell_of]
        self._inflate = np.sqrt(size / np.maximum(size - 1, 1))[self.cell_of]

    @property
    def stratified(self) -> bool:
        return 2 * sum(ix.size >= 2 for ix in self.cells) >= len(self.cells)

    @property
    def scheme(self) -> str:
        """'seeds', 'seeds+images', 'cases', ...; 'seeds (2 cells of one run held fixed)'."""
        single = sum(ix.size == 1 for ix in self.cells) if self.stratified else 0
        name = ("seeds" if self.stratified else "cases") + ("+images" if self.wrong is not None else "")
        return name + (f" ({single} cell{'s' * (single > 1)} of one run held fixed)" if single else "")

    @property
    def sizes(self) -> np.ndarray:
        return np.unique(self.n)

    @property
    def levels(self) -> np.ndarray:
        return np.unique(self.cell_d)

    def resample(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(run indices, their errors) of one bootstrap resample (module docstring)."""
        if self.stratified:
            idx = np.concatenate([rng.choice(ix, size=ix.size, replace=True) for ix in self.cells])
            centre = self._log_centre[idx]
            e = np.exp(centre + self._inflate[idx] * (np.log(self.err[idx]) - centre))
        else:
            idx = rng.integers(0, self.n.size, self.n.size)
            e = self.err[idx]
        if self.wrong is not None:
            m = self.wrong.shape[1]
            weights = np.bincount(rng.integers(0, m, m), minlength=m)
            shift = (self.wrong[idx] @ weights) / m - self.wrong[idx].mean(axis=1)
            e = np.maximum(e + shift, 0.5 / m)  # half an image: keeps the log finite
        return idx, e

    def cell_means(
        self, idx: np.ndarray | None = None, err: np.ndarray | None = None
    ) -> dict[str, np.ndarray]:
        """Per (N, D) cell with >= 1 run in `idx`: N, D, mean C and mean error (default: all runs)."""
        idx = np.arange(self.n.size) if idx is None else idx
        err = self.err if err is None else err
        k, cell = len(self.cells), self.cell_of[idx]
        count = np.bincount(cell, minlength=k).astype(float)
        seen = count > 0
        c = np.bincount(cell, weights=self.c[idx], minlength=k)[seen] / count[seen]
        e = np.bincount(cell, weights=err, minlength=k)[seen] / count[seen]
        return {"n": self.cell_n[seen], "d": self.cell_d[seen], "c": c, "err": e}


def compute_points(runs: pa.Table, rows: np.ndarray, predictions: pa.Table | None) -> ComputePoints | str:
    """The group's used runs (`rows`) as ComputePoints, or why there are none."""
    rows = np.asarray(rows, dtype=int)
    seen = _column(runs, "images_seen")[rows]
    fallback = (_column(runs, "data.num_train") * _column(runs, "train.epochs"))[rows]
    d = np.where(_positive(seen), seen, fallback)
    logged = _column(runs, "train_flops")[rows]
    c = np.where(_positive(logged), logged, BACKWARD_FACTOR * _column(runs, "flops_per_image")[rows] * d)
    n, err = _column(runs, "params")[rows], 1.0 - _column(runs, "test_top1")[rows]
    keep = _positive(n) & _positive(d) & _positive(c) & _positive(err)
    if not keep.any():
        lacking = "images seen (images_seen, or data.num_train and train.epochs)"
        if _positive(d).any():
            lacking = "training compute (train_flops, or flops_per_image)"
        if not _positive(err).any():
            lacking = "test_top1"
        return f"no finished run has {lacking}"
    ids = [runs.column("run_id")[int(i)].as_py() for i in rows[keep]]
    wrong, note = image_matrix(predictions, ids, split=TEST_SPLIT)
    return ComputePoints(
        n=n[keep],
        d=d[keep],
        c=c[keep],
        err=err[keep],
        run_ids=ids,
        d_source=_source_text(_positive(seen)[keep], D_SOURCES),
        c_source=_source_text(_positive(logged)[keep], C_SOURCES),
        n_without=int((~keep).sum()),
        wrong=wrong,
        image_note=note,
    )
