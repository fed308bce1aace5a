"""The steps of `vitscale analyze`, by name: a study kind lists the ones it runs, in order
(`StudyKind.analysis_steps`), and `pipeline.analyze` runs them one after the other.

Each step reads the `Analysis` (the snapshot's table and context, the options) and fills its
`AnalysisResult`, writing its CSV or JSON as it goes. A training study's steps read arms, fits and
predictions; a benchmark's read configurations per resolution (see `vitscale.kinds`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from threadpoolctl import threadpool_limits

from vitscale.analysis.figures import scaling as figs
from vitscale.analysis.figures.axes import axis_figure
from vitscale.analysis.figures.compute_optimal import compute_figures
from vitscale.analysis.figures.curves import learning_curve_figures
from vitscale.analysis.figures.resolution import accuracy_throughput_figure, accuracy_vs_resolution_figure
from vitscale.analysis.figures.search_progress import search_progress_figure
from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.analysis.load.beside import SideTable
from vitscale.analysis.load.curves import CURVES, fetch_curves
from vitscale.analysis.load.predictions import PREDICTIONS, empty, fetch_predictions
from vitscale.analysis.load.runs import StudyRuns
from vitscale.analysis.load.throughput import throughput_for
from vitscale.analysis.report.arms import write_arms
from vitscale.analysis.report.axes import write_axes_csv
from vitscale.analysis.report.compute_optimal import write_compute_json
from vitscale.analysis.report.resolution import write_resolution_csv
from vitscale.analysis.report.transfer import write_transfer
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.aggregate import aggregate_replicates
from vitscale.analysis.statistics.arms import Arm, study_arms
from vitscale.analysis.statistics.axes import axis_studies
from vitscale.analysis.statistics.compute_optimal import compute_optimal
from vitscale.analysis.statistics.crossover import crossovers, write_crossovers
from vitscale.analysis.statistics.exponents import cost_exponents
from vitscale.analysis.statistics.fits import (
    HUBER_DELTA,
    MIN_DISTINCT_P,
    clean_json,
    fit_rules,
    fit_to_dict,
    scaling_fits,
)
from vitscale.analysis.statistics.fronts import (
    bench_fronts,
    setting_columns,
    splitting_settings,
    train_fronts,
    with_setting,
    write_front,
)
from vitscale.analysis.statistics.importance import analyse_importance
from vitscale.analysis.statistics.learning_curves import arm_curves, curve_run_ids
from vitscale.analysis.statistics.resolution import eval_resolutions, resolution_points
from vitscale.analysis.statistics.search_progress import search_lines, searcher_summaries
from vitscale.analysis.statistics.tuning import add_tuning
from vitscale.analysis.statistics.verdicts import compare_arms
from vitscale.kinds import study_kind


@dataclass
class Analysis:
    """One `analyze` in progress: the result the steps fill and what they read."""

    res: AnalysisResult
    source: StudyRuns  # where the runs came from (MLflow or `--from`)
    snap: StudyRuns  # runs.parquet as read back: every step reads this table
    from_parquet: Path | str | None
    n_boot: int
    throughput_from: str | None
    progress: object  # rich Progress: steps add their own sub-bars
    scope: pa.Table | None = None  # the runs tables and fronts are drawn from (comparisons: final runs)
    predictions: pa.Table = field(default_factory=empty)

    @property
    def params(self) -> list[str]:
        return self.snap.param_columns

    @property
    def context(self) -> dict:
        return self.snap.context


@dataclass(frozen=True)
class Step:
    description: str  # the progress line while it runs
    run: Callable[[Analysis], None]


def _aggregate(a: Analysis, by: list[str] | None) -> None:
    res = a.res
    # A comparison's tables, fronts and figures are its tuned recipes over seeds (final phase),
    # never the tuning trials that chose them (one seed each, selected on the number shown);
    # the tuning record is in the arms table and runs.parquet.
    a.scope = res.runs.filter(pc.equal(res.runs.column("phase"), "final")) if res.comparison else res.runs
    res.aggregates = with_setting(
        aggregate_replicates(a.scope, a.params, a.snap.metric_columns, by), a.params
    )
    res.settings = splitting_settings(res.aggregates, a.params)


def aggregate_training(a: Analysis) -> None:
    """Seed means per configuration; a comparison (or a study with final runs) over its final phase."""
    a.res.comparison = ANALYSIS_KINDS[a.res.kind].arms_from_final(a.res.runs)
    _aggregate(a, None)


def aggregate_configurations(a: Analysis) -> None:
    """Seed means per benchmark configuration: series x regime x resolution x splitting settings."""
    _aggregate(a, ["series", "regime", "resolution", *setting_columns(a.res.runs, a.params)])


def _write_fronts(a: Analysis) -> None:
    for front in a.res.fronts:
        write_front(front, a.res.out_dir, a.params)


def training_fronts(a: Analysis) -> None:
    a.res.fronts = train_fronts(a.res.aggregates)
    _write_fronts(a)


def benchmark_fronts(a: Analysis) -> None:
    a.res.fronts = bench_fronts(a.res.aggregates)
    _write_fronts(a)


def arms_and_verdicts(a: Analysis) -> None:
    """Arms (a comparison's, or each mixer x regime's best configuration), their per-image
    predictions, the seed-paired verdicts against the reference, accuracy at other resolutions."""
    res = a.res
    res.arms, res.reference = study_arms(res.comparison, res.runs, a.params, a.context, res.policy)
    if res.comparison:
        add_tuning(res.runs, res.arms, a.context.get("space"), a.context.get("confirmation"))
        res.tuning_fidelity = a.context.get("fidelity")
    run_ids = _predicted_run_ids(res.runs, res.arms, res.comparison)
    a.predictions, res.predictions_path = _beside(
        a, PREDICTIONS, run_ids, fetch_predictions, "per-image predictions"
    )
    res.comparisons = compare_arms(
        res.arms, res.reference, res.runs, a.predictions, res.policy, res.margin, res.seed, res.n_resamples
    )
    write_transfer(res)
    if res.arms:
        _resolution(a)


def learning_curves(a: Analysis) -> None:
    """Each arm's validation and test top-1 against images seen over its finished runs, its
    convergence mark and budget, and one figure per regime."""
    res = a.res
    run_ids = curve_run_ids(res.arms, res.runs)
    curves, res.curves_path = _beside(a, CURVES, run_ids, fetch_curves, "learning curves")
    res.curves = arm_curves(res.arms, res.runs, curves, res.converged_threshold)
    res.curve_figures = learning_curve_figures(res.curves, res.out_dir / "figures")
    res.figure_paths += res.curve_figures


def search_progress(a: Analysis) -> None:
    """Best-so-far objective against compute spent, per searcher (and arm), for studies that
    searched with a sampler or population-based training (grid studies: nothing)."""
    res = a.res
    searcher = a.context.get("searcher")
    default = study_kind(res.kind).default_objective
    res.search_lines = search_lines(res.runs, searcher, default, a.context.get("searchers"))
    res.search_summaries = searcher_summaries(res.search_lines)
    res.search_metric = ((searcher or {}).get("objective") or {}).get("metric") or default[0]
    res.search_figures = search_progress_figure(res.search_lines, res.search_metric, res.out_dir / "figures")
    res.figure_paths += res.search_figures


def arms_tables(a: Analysis) -> None:
    """arms.csv and deltas.csv: the arms, their verdicts and (after learning_curves) their marks."""
    write_arms(a.res)


def fits(a: Analysis) -> None:
    """error(P) power laws per mixer x regime, bootstrapped over seeds and images."""
    res = a.res
    groups = a.progress.add_task("  bootstrap per mixer × regime", total=None)
    with threadpool_limits(limits=1, user_api="blas"):  # 3-parameter fits: BLAS threads only cost
        res.fits = scaling_fits(
            res.runs,
            n_boot=a.n_boot,
            seed=res.seed,
            on_group=lambda: a.progress.advance(groups),
            final_only=res.comparison,
            predictions=a.predictions,
        )
    a.progress.remove_task(groups)


def compute(a: Analysis) -> None:
    """The compute-optimal law, isoFLOP minima and frontier (compute_optimal.json)."""
    res = a.res
    res.compute = compute_optimal(
        res.runs, predictions=a.predictions, n_boot=a.n_boot, seed=res.seed, final_only=res.comparison
    )
    res.compute_path = write_compute_json(res.compute, res.out_dir)


def axes(a: Analysis) -> None:
    """Error along Gaussians, tolerance and sides (axes.csv)."""
    res = a.res
    with threadpool_limits(limits=1, user_api="blas"):
        res.axes = axis_studies(a.scope, a.params, res.policy, n_boot=a.n_boot, seed=res.seed)
    write_axes_csv(res.axes, res.out_dir)


def exponents(a: Analysis) -> None:
    a.res.cost_exponents = cost_exponents(a.res.aggregates)


def benchmark_crossovers(a: Analysis) -> None:
    """Where one series overtakes another along resolution (crossovers.csv)."""
    a.res.crossovers = crossovers(a.res.aggregates)
    write_crossovers(a.res.crossovers, a.res.out_dir / "crossovers.csv")


def fits_json(a: Analysis) -> None:
    res = a.res
    doc = {
        "study": res.study,
        "kind": res.kind,
        "settings": {
            "n_boot": a.n_boot,
            "seed": res.seed,
            "ci_level": 0.95,
            "min_distinct_params": MIN_DISTINCT_P,
            "model": "error(P) = a * P**(-b) + c, error = 1 - val_top1, P = params",
            "method": f"log space, LSE form, Huber loss (delta={HUBER_DELTA}), L-BFGS-B from a grid of starts",
            "incomplete_runs": res.policy,
            **fit_rules(),
        },
        "power_law": [fit_to_dict(f) for f in res.fits],
        "cost_exponents": res.cost_exponents,
        "crossovers": [asdict(c) for c in res.crossovers],
    }
    res.fits_path = res.out_dir / "fits.json"
    res.fits_path.write_text(json.dumps(clean_json(doc), indent=2) + "\n")


def training_figures(a: Analysis) -> None:
    res = a.res
    out, agg = res.out_dir / "figures", res.aggregates
    fronts = {f.name: f for f in res.fronts}
    paths: list[Path] = []
    for study in res.axes:
        paths += axis_figure(study, out)
    if res.resolution_points:
        paths += accuracy_vs_resolution_figure(
            res.resolution_points, out, "Test accuracy vs evaluation resolution"
        )
        if any(p.throughput is not None for p in res.resolution_points):
            paths += accuracy_throughput_figure(
                res.resolution_points, out, "Accuracy vs throughput over resolutions"
            )
    paths += compute_figures(res.compute, out)
    if "val_top1_mean" in agg.column_names:
        for x, name, title, logx in (
            ("params", "accuracy_vs_params", "Accuracy vs parameters", True),
            ("flops_per_image", "accuracy_vs_flops", "Accuracy vs FLOPs", True),
            ("nfe_mean", "accuracy_vs_nfe", "Accuracy vs NFE (regimes that count it)", False),
        ):
            front = fronts.get(f"{x}_val_top1")
            if front is not None:
                paths += figs.accuracy_figure(agg, x, front, out, name, title, logx=logx)
        if "params_mean" in agg.column_names:
            paths += figs.error_figure(agg, res.fits, out)
    res.figure_paths += paths


def benchmark_figures(a: Analysis) -> None:
    res = a.res
    out, agg = res.out_dir / "figures", res.aggregates
    fronts = {f.name: f for f in res.fronts}
    paths: list[Path] = []
    for metric, name, title in (
        ("images_per_second", "throughput_vs_resolution", "Throughput vs resolution"),
        ("peak_memory_mb", "memory_vs_resolution", "Peak memory vs resolution"),
    ):
        if f"{metric}_mean" in agg.column_names:
            paths += figs.resolution_figure(
                agg, metric, fronts.get(f"resolution_{metric}"), res.crossovers, out, name, title
            )
    if any(e["quantity"] == "seconds_per_image" for e in res.cost_exponents):
        paths += figs.cost_figure(agg, res.cost_exponents, out)
    res.figure_paths = paths


def importance(a: Analysis) -> None:
    """Which searched parameters mattered (fANOVA), and parallel coordinates."""
    res = a.res
    res.importance, res.importance_path, paths = analyse_importance(
        res.runs, a.context.get("space"), res.out_dir, comparison=res.comparison
    )
    res.figure_paths += paths


STEPS: dict[str, Step] = {
    "aggregate_replicates": Step("aggregating replicates", aggregate_training),
    "aggregate_configurations": Step("aggregating replicates", aggregate_configurations),
    "training_fronts": Step("Pareto fronts", training_fronts),
    "benchmark_fronts": Step("Pareto fronts", benchmark_fronts),
    "arms_and_verdicts": Step("arms and verdicts", arms_and_verdicts),
    "learning_curves": Step("learning curves", learning_curves),
    "search_progress": Step("search progress", search_progress),
    "arms_tables": Step("arms.csv, deltas.csv", arms_tables),
    "scaling_fits": Step("scaling-law fits (bootstrap)", fits),
    "compute_optimal": Step("compute-optimal fits (bootstrap)", compute),
    "axes": Step("axis studies (bootstrap)", axes),
    "cost_exponents": Step("cost exponents", exponents),
    "crossovers": Step("crossovers", benchmark_crossovers),
    "fits_json": Step("fits.json", fits_json),
    "training_figures": Step("figures", training_figures),
    "benchmark_figures": Step("figures", benchmark_figures),
    "importance": Step("parameter importance", importance),
}


def _beside(
    a: Analysis, side: SideTable, run_ids: list[str], fetch, label: str
) -> tuple[pa.Table, Path | None]:
    """(`side`'s rows for `run_ids`, its file or None): from MLflow (`fetch`), or the one beside
    `--from`'s runs.parquet; written to the output folder and read back (analyse what was written,
    as with runs.parquet)."""
    res, progress = a.res, a.progress
    path = res.out_dir / side.file
    if a.from_parquet is None:
        task = progress.add_task(f"  {label}", total=len(run_ids))
        source = a.source.tracking_uri
        table = fetch(source, run_ids, lambda: progress.advance(task)) if source else side.empty()
        progress.remove_task(task)
    else:
        beside = Path(a.from_parquet).parent / side.file
        table = side.read(beside)
        if beside.resolve() == path.resolve():
            return table, (path if table.num_rows else None)
    written = side.write(table, path)
    return side.read(path), written


def _predicted_run_ids(runs: pa.Table, arms: list[Arm], comparison: bool) -> list[str]:
    """The finished runs whose predictions are read, sorted: the arms' (what a verdict pairs) and
    the fits' (every finished run; comparison studies: the final phase)."""
    ids, used, phase = (runs.column(c).to_pylist() for c in ("run_id", "used", "phase"))
    fitted = {ids[i] for i in range(len(ids)) if used[i] and (phase[i] == "final" or not comparison)}
    return sorted(fitted | {ids[i] for arm in arms for i in arm.rows if used[i]})


def _resolution(a: Analysis) -> None:
    """Accuracy at each evaluated side per arm, placed at the benchmark's images/s there."""
    res = a.res
    if not eval_resolutions(res.runs):
        return
    name = a.throughput_from or (a.context.get("analysis") or {}).get("throughput_from")
    throughput, res.throughput_note = throughput_for(name, a.source.tracking_uri, res.out_dir, a.from_parquet)
    res.throughput_from = name
    res.resolution_points = resolution_points(
        res.arms,
        res.reference,
        res.runs,
        a.predictions,
        res.policy,
        res.margin,
        throughput,
        seed=res.seed,
        n_resamples=res.n_resamples,
    )
    write_resolution_csv(res)
