"""`AnalysisResult`: everything one analysis produced, in memory and on disk."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.analysis.load.fields import as_float
from vitscale.analysis.statistics.arms import Arm
from vitscale.analysis.statistics.axes import AxisStudy
from vitscale.analysis.statistics.compute_optimal import ComputeOptimal
from vitscale.analysis.statistics.convergence import DEFAULT_THRESHOLD_POINTS, Convergence
from vitscale.analysis.statistics.crossover import Crossover
from vitscale.analysis.statistics.fits import PowerLawFit
from vitscale.analysis.statistics.fronts import Front
from vitscale.analysis.statistics.learning_curves import ArmCurve
from vitscale.analysis.statistics.resolution import ResolutionPoint
from vitscale.analysis.statistics.search_progress import SearcherSummary, SearchLine
from vitscale.analysis.statistics.verdicts import Comparison
from vitscale.kinds import StudyKind, study_kind
from vitscale.models.registry import mixer_order, regime_order


@dataclass
class AnalysisResult:
    """Tables (runs with analysis fields, per-configuration aggregates), fronts, fits and file paths."""

    study: str
    kind: str  # a registered study kind's name (vitscale.kinds): "train", "benchmark", "comparison"
    out_dir: Path
    runs: pa.Table
    aggregates: pa.Table
    parent_run_ids: list[str] = field(default_factory=list)
    fronts: list[Front] = field(default_factory=list)
    fits: list[PowerLawFit] = field(default_factory=list)
    axes: list[AxisStudy] = field(default_factory=list)  # error along Gaussians, tolerance, sides
    compute: ComputeOptimal | None = None  # compute-optimal law, isoFLOPs, frontier (training studies)
    cost_exponents: list[dict] = field(default_factory=list)
    crossovers: list[Crossover] = field(default_factory=list)
    arms: list[Arm] = field(default_factory=list)
    comparisons: list[Comparison] = field(default_factory=list)  # each arm against its reference, on test
    reference: dict = field(default_factory=dict)  # the reference arm's values the Δ are taken against
    policy: str = "drop"  # how runs without a final number count in arm means and Δ (outcomes.py)
    margin: float = 0.01  # equivalence margin of the verdicts, accuracy fraction (0.01 = 1 point)
    n_resamples: int = 0  # of the verdicts' bootstrap over seeds and test images
    curves: list[ArmCurve] = field(default_factory=list)  # each arm's learning curve, mark and budget
    converged_threshold: float = DEFAULT_THRESHOLD_POINTS / 100  # gain over the last quarter (fraction)
    curve_figures: list[Path] = field(default_factory=list)  # the learning curves (also in figure_paths)
    search_lines: list[SearchLine] = field(default_factory=list)  # best-so-far per searcher, seed (and arm)
    search_summaries: list[SearcherSummary] = field(default_factory=list)  # over seeds, at equal compute
    search_metric: str = ""  # the objective the search lines follow
    search_figures: list[Path] = field(default_factory=list)  # their figure (also in figure_paths)
    seed: int = 0
    comparison: bool = False
    tuning_fidelity: dict | None = None  # comparison: search.fidelity its arms were tuned at, if any
    figure_paths: list[Path] = field(default_factory=list)
    settings: list[str] = field(
        default_factory=list
    )  # params that split configurations beyond the arm fields
    resolution_points: list[ResolutionPoint] = field(default_factory=list)  # accuracy at each eval side
    throughput_from: str | None = None  # the benchmark study the resolution front's images/s come from
    throughput_note: str = ""  # why the front has no throughput, when it has none
    importance: list[dict] = field(default_factory=list)  # fANOVA rows (analysis.statistics.importance)
    importance_path: Path | None = None
    runs_path: Path | None = None
    predictions_path: Path | None = None  # predictions.parquet; None when no run logged predictions
    curves_path: Path | None = None  # curves.parquet; None when no history was read
    fits_path: Path | None = None
    compute_path: Path | None = None  # compute_optimal.json; None when no group had compute points
    report_path: Path | None = None
    logged_to: str | None = None  # the parent run id the artifacts went to

    @property
    def study_kind(self) -> StudyKind:
        return study_kind(self.kind)

    @property
    def convergence(self) -> dict[str, Convergence]:
        """arm label -> its convergence mark (arms with a curve)."""
        return {c.label: c.convergence for c in self.curves}

    @property
    def front_paths(self) -> dict[str, Path]:
        return {f.name: f.path for f in self.fronts if f.path is not None}

    def counts(self) -> dict[str, int]:
        """Trial outcome counts over the whole study."""
        status = self.runs.column("status").to_pylist()
        phase = self.runs.column("phase").to_pylist() if "phase" in self.runs.column_names else []
        early = self.runs.column("stopped_early").to_pylist()
        dnt = (
            self.runs.column("did_not_train").to_pylist() if "did_not_train" in self.runs.column_names else []
        )
        return {
            "runs": len(status),
            "used": sum(self.runs.column("used").to_pylist()),
            "finished": sum(s == "FINISHED" for s in status),
            "failed": sum(s == "FAILED" for s in status),
            "killed": sum(s == "KILLED" for s in status),
            "other": sum(s not in ("FINISHED", "FAILED", "KILLED") for s in status),
            "stopped_early": sum(bool(e) for e in early),
            "did_not_train": sum(d is True for d in dnt),
            "tuning": sum(p == "tune" for p in phase),
            "confirmation": sum(p == "confirm" for p in phase),
            "final": sum(p == "final" for p in phase),
        }

    def summary(self) -> list[dict]:
        """Per mixer x regime (series x regime for benchmarks): the headline numbers for the CLI."""
        agg = self.aggregates
        label, headline = self.study_kind.series_label, ANALYSIS_KINDS[self.kind].headline
        names, regimes = agg.column(label).to_pylist(), agg.column("regime").to_pylist()
        used = as_float(agg.column("n_used"))
        out = []
        for regime in regime_order([r for r in regimes if r is not None]):
            for name in series_order(names):
                idx = [i for i in range(agg.num_rows) if names[i] == name and regimes[i] == regime]
                if idx:
                    out.append({label: name, "regime": regime, **headline(self, idx, used)})
        return out

    @property
    def summary_columns(self) -> tuple[tuple[str, str, float, str], ...]:
        """The columns of `vitscale analyze`'s summary table: (row key, header, scale, format spec)."""
        return ANALYSIS_KINDS[self.kind].summary_columns

    def runs_of(self, idx: list[int]) -> np.ndarray:
        """Row indices in `runs` of the used runs of the given aggregate rows."""
        wanted = set(idx)
        ids = {
            r
            for i, joined in enumerate(self.aggregates.column("run_ids").to_pylist())
            if i in wanted
            for r in joined.split(";")
            if r
        }
        return np.array(
            [i for i, r in enumerate(self.runs.column("run_id").to_pylist()) if r in ids], dtype=int
        )


def series_order(names: list) -> list:
    mixers = mixer_order([str(n).split("/")[0] for n in names if n is not None])
    present = [n for n in dict.fromkeys(names) if n is not None]
    return sorted(present, key=lambda n: (mixers.index(str(n).split("/")[0]), str(n)))
