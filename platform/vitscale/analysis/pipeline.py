"""`analyze`: a study's runs -> runs.parquet -> aggregates, fronts, fits, figures, report -> MLflow.

Every step reads the table as read back from runs.parquet, so `--from runs.parquet` (no MLflow)
redraws exactly the same CSVs, fits.json and report.md.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from threadpoolctl import threadpool_limits

from vitscale.analysis import figures as figs
from vitscale.analysis.aggregate import aggregate_replicates
from vitscale.analysis.arms import Arm, is_comparison, study_arms
from vitscale.analysis.axes import axis_studies
from vitscale.analysis.axes_figures import axis_figure
from vitscale.analysis.compute_optimal import compute_optimal
from vitscale.analysis.compute_optimal_figures import compute_figures
from vitscale.analysis.contest import N_RESAMPLES
from vitscale.analysis.crossover import crossovers, write_crossovers
from vitscale.analysis.exponents import cost_exponents
from vitscale.analysis.fields import with_fields
from vitscale.analysis.fits import (
    HUBER_DELTA,
    MIN_DISTINCT_P,
    N_BOOT,
    clean_json,
    fit_rules,
    fit_to_dict,
    scaling_fits,
)
from vitscale.analysis.fronts import (
    bench_fronts,
    setting_columns,
    splitting_settings,
    train_fronts,
    with_setting,
    write_front,
)
from vitscale.analysis.importance import analyse_importance
from vitscale.analysis.outcomes import POLICIES, with_outcomes
from vitscale.analysis.predictions import (
    PREDICTIONS_FILE,
    empty,
    fetch_predictions,
    read_predictions_table,
    write_predictions_table,
)
from vitscale.analysis.report import write_report
from vitscale.analysis.report_arms import write_arms
from vitscale.analysis.report_axes import write_axes_csv
from vitscale.analysis.report_compute import write_compute_json
from vitscale.analysis.report_resolution import write_resolution_csv
from vitscale.analysis.resolution import eval_resolutions, resolution_points
from vitscale.analysis.resolution_figures import accuracy_throughput_figure, accuracy_vs_resolution_figure
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.runs import StudyRuns, load_study_runs
from vitscale.analysis.snapshot import read_snapshot, write_snapshot
from vitscale.analysis.throughput import throughput_for
from vitscale.analysis.tuning import add_tuning
from vitscale.analysis.verdicts import compare_arms
from vitscale.errors import UserError, make_folder
from vitscale.tracking import store


def analyze(
    study: str,
    tracking_uri: str | None = None,
    out: Path | str | None = None,
    from_parquet: Path | str | None = None,
    *,
    experiment: str | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    incomplete: str = "drop",
    margin: float = 1.0,
    throughput_from: str | None = None,
    log_artifacts: bool = True,
    console: Console | None = None,
) -> AnalysisResult:
    """Analyse `study` from MLflow (or a runs.parquet snapshot) into `out` (default reports/STUDY/).

    `incomplete` ("drop" | "chance") says how failed, stopped-early and killed runs count in the
    arm means and Δ; `margin` (points of top-1) is the equivalence margin of the verdicts;
    `throughput_from` (default: the study's `analysis.throughput_from`) names the benchmark study
    whose images/s place accuracy-at-resolution on its accuracy–throughput front. From
    MLflow the whole output directory is logged back under `analysis/` of the study's newest
    parent run; from a snapshot nothing is logged.
    """
    if incomplete not in POLICIES:
        raise UserError(f"--incomplete: {incomplete!r} is not one of {', '.join(POLICIES)}")
    if not 0 < margin < 100:
        raise UserError(f"--margin: {margin:g} points is not between 0 and 100; pass e.g. --margin 1")
    out_dir = Path(out) if out is not None else Path("reports") / study
    console = console or Console(stderr=True)
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    # Off when stderr is not a terminal: logs and captured output get no progress residue.
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as progress:
        step = progress.add_task(f"analyze {study}: reading runs", total=7)
        source = _read(study, tracking_uri, from_parquet, experiment)
        make_folder(out_dir, "--out")
        runs_path = out_dir / "runs.parquet"
        if from_parquet is None or Path(from_parquet).resolve() != runs_path.resolve():
            write_snapshot(source, runs_path)
        snap = read_snapshot(runs_path)  # analyse what was written: MLflow and --from agree exactly
        params, metrics = snap.param_columns, snap.metric_columns
        runs = with_outcomes(with_fields(snap.table))
        res = AnalysisResult(
            study=snap.study,
            kind=snap.kind,
            out_dir=out_dir,
            runs=runs,
            aggregates=runs,
            parent_run_ids=source.parent_run_ids,
            runs_path=runs_path,
            policy=incomplete,
            margin=margin / 100,
            n_resamples=N_RESAMPLES,
            seed=seed,
        )

        progress.update(step, advance=1, description="aggregating replicates")
        by = None
        if res.kind == "benchmark":
            by = ["series", "regime", "resolution", *setting_columns(runs, params)]
        res.comparison = res.kind != "benchmark" and is_comparison(res.kind, runs)
        # A comparison's tables, fronts and figures are its tuned recipes over seeds (final phase),
        # never the tuning trials that chose them (one seed each, selected on the number shown);
        # the tuning record is in the arms table and runs.parquet.
        scope = runs.filter(pc.equal(runs.column("phase"), "final")) if res.comparison else runs
        res.aggregates = with_setting(aggregate_replicates(scope, params, metrics, by), params)
        res.settings = splitting_settings(res.aggregates, params)

        progress.update(step, advance=1, description="Pareto fronts")
        res.fronts = bench_fronts(res.aggregates) if res.kind == "benchmark" else train_fronts(res.aggregates)
        for front in res.fronts:
            write_front(front, out_dir, params)
        preds = empty()
        if res.kind != "benchmark":
            res.arms, res.reference = study_arms(res.kind, runs, params, snap.context, incomplete)
            if res.comparison:
                add_tuning(runs, res.arms, snap.context.get("space"))
            preds = _predictions(source, from_parquet, res, progress)
            res.comparisons = compare_arms(
                res.arms, res.reference, runs, preds, res.policy, res.margin, seed, res.n_resamples
            )
            write_arms(res)
            if res.arms:
                _resolution(res, source, from_parquet, throughput_from, snap.context, preds)

        progress.update(step, advance=1, description="scaling-law fits (bootstrap)")
        if res.kind != "benchmark":
            groups = progress.add_task("  bootstrap per mixer × regime", total=None)
            with threadpool_limits(limits=1, user_api="blas"):  # 3-parameter fits: BLAS threads only cost
                res.fits = scaling_fits(
                    runs,
                    n_boot=n_boot,
                    seed=seed,
                    on_group=lambda: progress.advance(groups),
                    final_only=res.comparison,
                    predictions=preds,
                )
            progress.remove_task(groups)
            progress.update(step, description="compute-optimal fits (bootstrap)")
            res.compute = compute_optimal(
                runs, predictions=preds, n_boot=n_boot, seed=seed, final_only=res.comparison
            )
            res.compute_path = write_compute_json(res.compute, out_dir)
            with threadpool_limits(limits=1, user_api="blas"):  # error along Gaussians, tolerance, sides
                res.axes = axis_studies(scope, params, res.policy, n_boot=n_boot, seed=seed)
            write_axes_csv(res.axes, out_dir)
        res.cost_exponents = cost_exponents(res.aggregates)
        if res.kind == "benchmark":
            res.crossovers = crossovers(res.aggregates)
            write_crossovers(res.crossovers, out_dir / "crossovers.csv")
        res.fits_path = _write_fits(res, n_boot, seed)

        progress.update(step, advance=1, description="figures")
        res.figure_paths = _figures(res)
        if res.kind != "benchmark":  # which searched parameters mattered (fANOVA), parallel coordinates
            res.importance, res.importance_path, paths = analyse_importance(
                runs, snap.context.get("space"), out_dir, comparison=res.comparison
            )
            res.figure_paths += paths

        progress.update(step, advance=1, description="report")
        write_report(res, out_dir / "report.md")

        progress.update(step, advance=1, description="logging artifacts to MLflow")
        if log_artifacts and from_parquet is None and source.tracking_uri and source.parent_run_ids:
            res.logged_to = _log(source, out_dir, console)
        progress.update(step, advance=1)
    return res


def _read(
    study: str, tracking_uri: str | None, from_parquet: Path | str | None, experiment: str | None
) -> StudyRuns:
    if from_parquet is None:
        return load_study_runs(study, tracking_uri, experiment)
    snap = read_snapshot(Path(from_parquet))
    if study and snap.study != study:
        raise UserError(
            f"--from: {from_parquet} holds study '{snap.study}', not '{study}'; "
            f"pass `vitscale analyze {snap.study} --from {from_parquet}`"
        )
    return snap


def _predictions(
    source: StudyRuns, from_parquet: Path | str | None, res: AnalysisResult, progress
) -> pa.Table:
    """The per-image predictions of the finished runs the verdicts and fits read, written to
    predictions.parquet and read back: from MLflow, or from the one beside `--from`'s runs.parquet."""
    path = res.out_dir / PREDICTIONS_FILE
    if from_parquet is None:
        run_ids = _predicted_run_ids(res.runs, res.arms, res.comparison)
        task = progress.add_task("  per-image predictions", total=len(run_ids))
        table = (
            fetch_predictions(source.tracking_uri, run_ids, lambda: progress.advance(task))
            if source.tracking_uri
            else empty()
        )
        progress.remove_task(task)
    else:
        beside = Path(from_parquet).parent / PREDICTIONS_FILE
        table = read_predictions_table(beside)
        if beside.resolve() == path.resolve():
            res.predictions_path = path if table.num_rows else None
            return table
    res.predictions_path = write_predictions_table(table, path)
    return read_predictions_table(path)  # analyse what was written, as with runs.parquet


def _predicted_run_ids(runs: pa.Table, arms: list[Arm], comparison: bool) -> list[str]:
    """The finished runs whose predictions are read, sorted: the arms' (what a verdict pairs) and
    the fits' (every finished run; comparison studies: the final phase)."""
    ids, used, phase = (runs.column(c).to_pylist() for c in ("run_id", "used", "phase"))
    fitted = {ids[i] for i in range(len(ids)) if used[i] and (phase[i] == "final" or not comparison)}
    return sorted(fitted | {ids[i] for arm in arms for i in arm.rows if used[i]})


def _write_fits(res: AnalysisResult, n_boot: int, seed: int) -> Path:
    doc = {
        "study": res.study,
        "kind": res.kind,
        "settings": {
            "n_boot": n_boot,
            "seed": seed,
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
    path = res.out_dir / "fits.json"
    path.write_text(json.dumps(clean_json(doc), indent=2) + "\n")
    return path


def _resolution(res: AnalysisResult, source, from_parquet, throughput_from, context: dict, preds) -> None:
    """Accuracy at each evaluated side per arm, placed at the benchmark's images/s there."""
    if not eval_resolutions(res.runs):
        return
    name = throughput_from or (context.get("analysis") or {}).get("throughput_from")
    throughput, res.throughput_note = throughput_for(name, source.tracking_uri, res.out_dir, from_parquet)
    res.throughput_from = name
    res.resolution_points = resolution_points(
        res.arms,
        res.reference,
        res.runs,
        preds,
        res.policy,
        res.margin,
        throughput,
        seed=res.seed,
        n_resamples=res.n_resamples,
    )
    write_resolution_csv(res)


def _figures(res: AnalysisResult) -> list[Path]:
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
    if res.kind == "benchmark":
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
        return paths
    paths += compute_figures(res.compute, out)
    if "val_top1_mean" not in agg.column_names:
        return paths
    for x, name, title, logx in (
        ("params", "accuracy_vs_params", "Accuracy vs parameters", True),
        ("flops_per_image", "accuracy_vs_flops", "Accuracy vs FLOPs", True),
        ("nfe_mean", "accuracy_vs_nfe", "Accuracy vs NFE (ODE regime)", False),
    ):
        front = fronts.get(f"{x}_val_top1")
        if front is not None:
            paths += figs.accuracy_figure(agg, x, front, out, name, title, logx=logx)
    if "params_mean" in agg.column_names:
        paths += figs.error_figure(agg, res.fits, out)
    return paths


def _log(source: StudyRuns, out_dir: Path, console: Console) -> str | None:
    """Log DIR under `analysis/` of the newest parent run; a failure here warns, the files stay."""
    from mlflow.exceptions import MlflowException  # third-party, heavy: only when logging

    parent = source.parent_run_ids[0]
    try:
        store.client_for(source.tracking_uri).log_artifacts(parent, str(out_dir), artifact_path="analysis")
    except (MlflowException, OSError) as exc:
        console.print(f"[yellow]warning: could not log the analysis to MLflow run {parent}: {exc}[/]")
        return None
    return parent
