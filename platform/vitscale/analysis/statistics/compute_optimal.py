"""Compute-optimal scaling per mixer x regime on test error (1 − test_top1) of finished runs: the
parametric law E + A/N^α + B/D^β (data_law), isoFLOP minima and N*(C) ∝ C^a (isoflop), the
frontier error*(C) (frontier), and the gap between mixers at matched compute (frontier: frontier_gap).

Runs are those `used` (finished their schedule); comparison studies: the final phase only (the
tuned recipes over seeds, as in fits.py). N = params, D and C as compute_points says (its
sources are recorded per group). Everything beyond the measured N, D or C range is marked
`extrapolated`. Seeded: the same runs give the same numbers, from MLflow or from runs.parquet.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pyarrow as pa
from threadpoolctl import threadpool_limits

from vitscale.analysis.load.outcomes import outcome_counts
from vitscale.analysis.statistics.compute_points import ComputePoints, compute_points
from vitscale.analysis.statistics.data_law import DataLawFit, fit_data_law
from vitscale.analysis.statistics.frontier import (
    N_GRID,
    CostModel,
    FrontierGap,
    common_range,
    cost_model,
    envelope_at,
    envelope_steps,
    extrapolated,
    frontier_gap,
    law_frontier,
    optimal_exponent,
)
from vitscale.analysis.statistics.isoflop import IsoFlops, isoflops
from vitscale.models.registry import BASELINE, mixer_order, regime_order

FRONTIER_POINTS = 60
EXTEND = 3.0  # the fitted frontier is drawn from C_min / EXTEND to C_max x EXTEND (beyond: extrapolation)
LEVEL = 0.95


@dataclass
class ComputeGroup:
    """One mixer x regime: its points, law, isoFLOP minima, frontier, or why it has none."""

    mixer: str
    regime: str
    counts: dict[str, int] = field(default_factory=dict)
    points: ComputePoints | None = None
    reason: str | None = None  # no points at all
    law: DataLawFit | None = None
    isoflop: IsoFlops | None = None
    cost: CostModel | None = None
    a_law: float | None = None  # N* ∝ C^a implied by the law and the cost model
    a_law_ci: list[float] = field(default_factory=list)
    frontier: dict = field(default_factory=dict)  # budgets, error, n_opt, extrapolated (fitted law)
    envelope: dict = field(default_factory=dict)  # c, error: the measured envelope's cells

    @property
    def label(self) -> str:
        return f"{self.mixer} · {self.regime}"

    @property
    def n_sizes(self) -> int:
        return 0 if self.points is None else int(self.points.sizes.size)

    def to_dict(self) -> dict:
        pts = self.points
        out = {"mixer": self.mixer, "regime": self.regime, "counts": self.counts, "reason": self.reason}
        if pts is not None:
            out |= {
                "runs": int(pts.n.size),
                "runs_without_compute": pts.n_without,
                "sizes": int(pts.sizes.size),
                "data_levels": int(pts.levels.size),
                "D_source": pts.d_source,
                "C_source": pts.c_source,
                "bootstrap": pts.scheme,
                "C_range": [float(pts.c.min()), float(pts.c.max())],
            }
        out["law"] = None if self.law is None else self.law.to_dict()
        out["isoflop"] = None if self.isoflop is None else self.isoflop.to_dict()
        out["cost_per_image"] = None if self.cost is None else asdict(self.cost)
        out |= {"a_law": self.a_law, "a_law_ci": self.a_law_ci, "frontier": self.frontier}
        return out | {"envelope": self.envelope}


@dataclass
class ComputeOptimal:
    groups: list[ComputeGroup] = field(default_factory=list)
    gaps: list[FrontierGap] = field(default_factory=list)
    reference: str = BASELINE
    n_boot: int = 0
    seed: int = 0
    reason: str | None = None  # why no group has points

    @property
    def analysed(self) -> list[ComputeGroup]:
        return [g for g in self.groups if g.points is not None]

    def to_dict(self) -> dict:
        return {
            "reference": self.reference,
            "n_boot": self.n_boot,
            "seed": self.seed,
            "reason": self.reason,
            "groups": [g.to_dict() for g in self.groups],
            "gaps": [g.to_dict() for g in self.gaps],
        }


def _frontier(group: ComputeGroup) -> None:
    """The measured envelope, and the fitted frontier with its extrapolation marks and a_law."""
    pts, cells = group.points, group.points.cell_means()
    c, e = envelope_steps(cells["c"], cells["err"])
    group.envelope = {"c": [float(v) for v in c], "error": [float(v) for v in e]}
    if group.law is None or not group.law.ok or group.cost is None:
        return
    budgets = np.geomspace(pts.c.min() / EXTEND, pts.c.max() * EXTEND, FRONTIER_POINTS)
    err, n = law_frontier(group.law.params, group.cost, budgets)
    group.frontier = {
        "budgets": [float(v) for v in budgets],
        "error": [float(v) for v in err],
        "n_opt": [float(v) for v in n],
        "extrapolated": [bool(v) for v in extrapolated(group.law, group.cost, pts, budgets)],
    }
    group.a_law = float(optimal_exponent(group.law.params, group.cost)[0])
    if group.law.draws is not None:
        q = [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2]
        group.a_law_ci = [float(v) for v in np.percentile(optimal_exponent(group.law.draws, group.cost), q)]


def analyse_group(group: ComputeGroup, n_boot: int, seed: int) -> ComputeGroup:
    """Law, isoFLOPs and frontier of a group whose points are set."""
    group.law = fit_data_law(group.points, n_boot=n_boot, seed=seed, level=LEVEL)
    group.isoflop = isoflops(group.points, n_boot=n_boot, seed=seed, level=LEVEL)
    group.cost = cost_model(group.points)
    _frontier(group)
    return group


def _envelope_draws(pts: ComputePoints, grid: np.ndarray, n_boot: int, seed: int) -> np.ndarray:
    rng, rows = np.random.default_rng(seed), []
    for _ in range(n_boot):
        cells = pts.cell_means(*pts.resample(rng))
        rows.append(envelope_at(grid, cells["c"], cells["err"]))
    return np.asarray(rows).reshape(n_boot, grid.size)


def gaps_between(cand: ComputeGroup, ref: ComputeGroup, n_boot: int, seed: int) -> list[FrontierGap]:
    """Δ error*(C) of `cand` against `ref` on the law (where both were fitted) and on the envelopes."""
    span = common_range(cand.points.c, ref.points.c)
    if span is None:
        return []
    grid, out = np.geomspace(*span, N_GRID), []

    def new(basis: str) -> FrontierGap:
        return FrontierGap(cand.regime, cand.mixer, ref.mixer, basis, c_range=span)

    if cand.law.ok and ref.law.ok and cand.cost is not None and ref.cost is not None:
        delta = (
            law_frontier(cand.law.params, cand.cost, grid)[0]
            - law_frontier(ref.law.params, ref.cost, grid)[0]
        )
        draws = None
        if cand.law.draws is not None and ref.law.draws is not None:
            k = min(len(cand.law.draws), len(ref.law.draws))
            draws = (
                law_frontier(cand.law.draws[:k], cand.cost, grid)[0]
                - law_frontier(ref.law.draws[:k], ref.cost, grid)[0]
            )
        outside = extrapolated(cand.law, cand.cost, cand.points, grid) | extrapolated(
            ref.law, ref.cost, ref.points, grid
        )
        out.append(frontier_gap(new("fitted law"), grid, delta, draws, outside, LEVEL))
    cc, rc = cand.points.cell_means(), ref.points.cell_means()
    delta = envelope_at(grid, cc["c"], cc["err"]) - envelope_at(grid, rc["c"], rc["err"])
    draws = None
    if n_boot:
        draws = _envelope_draws(cand.points, grid, n_boot, seed + 1) - _envelope_draws(
            ref.points, grid, n_boot, seed + 2
        )
    out.append(frontier_gap(new("envelope"), grid, delta, draws, None, LEVEL))
    return out


def compute_optimal(
    runs: pa.Table,
    *,
    predictions: pa.Table | None = None,
    n_boot: int,
    seed: int = 0,
    final_only: bool = False,
    on_group=None,
) -> ComputeOptimal:
    """Every mixer x regime of a `with_outcomes` runs table, and the gaps to the reference mixer."""
    result = ComputeOptimal(n_boot=n_boot, seed=seed)
    if "test_top1" not in runs.column_names or "params" not in runs.column_names:
        result.reason = "no run logged test_top1 and params"
        return result
    used = np.asarray(runs.column("used").to_pylist(), dtype=bool)
    scope = np.ones(runs.num_rows, dtype=bool)
    if final_only:
        scope = np.asarray([p == "final" for p in runs.column("phase").to_pylist()], dtype=bool)
    mixers, regimes = (
        np.asarray(runs.column("mixer").to_pylist()),
        np.asarray(runs.column("regime").to_pylist()),
    )
    with threadpool_limits(limits=1, user_api="blas"):  # tiny problems: see data_law.fit_data_law
        for regime in regime_order([r for r in regimes if r is not None]):
            for mixer in mixer_order([m for m in mixers if m is not None]):
                group = scope & (mixers == mixer) & (regimes == regime)
                if not (used & group).any():
                    continue
                g = ComputeGroup(mixer, regime, counts=outcome_counts(runs, np.flatnonzero(group)))
                got = compute_points(runs, np.flatnonzero(used & group), predictions)
                if isinstance(got, str):
                    g.reason = got
                else:
                    g.points = got
                    analyse_group(g, n_boot, seed)
                result.groups.append(g)
                if on_group:
                    on_group()
        for regime in regime_order([g.regime for g in result.analysed]):
            here = {g.mixer: g for g in result.analysed if g.regime == regime}
            if BASELINE in here:
                for mixer, g in here.items():
                    if mixer != BASELINE:
                        result.gaps += gaps_between(g, here[BASELINE], n_boot, seed)
    if not result.analysed and result.groups:
        result.reason = "; ".join(dict.fromkeys(g.reason for g in result.groups))
    return result
