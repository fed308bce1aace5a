"""`analyze`: a study's runs -> runs.parquet -> its kind's steps (aggregates, fronts, fits,
figures: `analysis.steps`, listed by `StudyKind.analysis_steps`) -> report -> MLflow.

Every step reads the table as read back from runs.parquet, so `--from runs.parquet` (no MLflow)
redraws exactly the same CSVs, fits.json and report.md.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)

from vitscale.analysis.load.fields import with_fields
from vitscale.analysis.load.outcomes import POLICIES, with_outcomes
from vitscale.analysis.load.runs import StudyRuns, load_study_runs, read_snapshot, write_snapshot
from vitscale.analysis.report.sections import write_report
from vitscale.analysis.result import AnalysisResult
from vitscale.analysis.statistics.contest import N_RESAMPLES
from vitscale.analysis.statistics.convergence import DEFAULT_THRESHOLD_POINTS
from vitscale.analysis.statistics.fits import N_BOOT
from vitscale.analysis.steps import STEPS, Analysis
from vitscale.errors import UserError, make_folder
from vitscale.kinds import study_kind
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
    converged_threshold: float = DEFAULT_THRESHOLD_POINTS,
    throughput_from: str | None = None,
    log_artifacts: bool = True,
    console: Console | None = None,
) -> AnalysisResult:
    """Analyse `study` from MLflow (or a runs.parquet snapshot) into `out` (default reports/STUDY/).

    `incomplete` ("drop" | "chance") says how failed, stopped-early and killed runs count in the
    arm means and Δ; `margin` (points of top-1) is the equivalence margin of the verdicts;
    `converged_threshold` (points of top-1) is the validation gain over the last quarter of
    training above which an arm is marked still improving beside its verdicts;
    `throughput_from` (default: the study's `analysis.throughput_from`) names the benchmark study
    whose images/s place accuracy-at-resolution on its accuracy–throughput front. From
    MLflow the whole output directory is logged back under `analysis/` of the study's newest
    parent run; from a snapshot nothing is logged.
    """
    if incomplete not in POLICIES:
        raise UserError(f"--incomplete: {incomplete!r} is not one of {', '.join(POLICIES)}")
    if not 0 < margin < 100:
        raise UserError(f"--margin: {margin:g} points is not between 0 and 100; pass e.g. --margin 1")
    if not 0 <= converged_threshold < 100:
        raise UserError(
            f"--converged-threshold: {converged_threshold:g} points is not between 0 and 100; "
            "pass e.g. --converged-threshold 0.5"
        )
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
        step = progress.add_task(f"analyze {study}: reading runs", total=None)
        source = _read(study, tracking_uri, from_parquet, experiment)
        make_folder(out_dir, "--out")
        runs_path = out_dir / "runs.parquet"
        if from_parquet is None or Path(from_parquet).resolve() != runs_path.resolve():
            write_snapshot(source, runs_path)
        snap = read_snapshot(runs_path)  # analyse what was written: MLflow and --from agree exactly
        kind = study_kind(snap.kind)  # which steps run, in which order: the kind's list
        progress.update(step, total=len(kind.analysis_steps) + 3, advance=1)
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
            converged_threshold=converged_threshold / 100,
            n_resamples=N_RESAMPLES,
            seed=seed,
        )
        analysis = Analysis(res, source, snap, from_parquet, n_boot, throughput_from, progress)
        for name in kind.analysis_steps:
            progress.update(step, description=STEPS[name].description)
            STEPS[name].run(analysis)
            progress.advance(step)

        progress.update(step, description="report")
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


def _log(source: StudyRuns, out_dir: Path, console: Console) -> str | None:
    """Log DIR under `analysis/` of the newest parent run; a failure here warns, the files stay."""
    parent = source.parent_run_ids[0]
    try:
        store.client_for(source.tracking_uri).log_artifacts(parent, str(out_dir), artifact_path="analysis")
    except (store.mlflow_exception(), OSError) as exc:
        console.print(f"[yellow]warning: could not log the analysis to MLflow run {parent}: {exc}[/]")
        return None
    return parent
