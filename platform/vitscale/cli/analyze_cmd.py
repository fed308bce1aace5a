"""`vitscale analyze STUDY`: Pareto fronts, scaling-law fits, figures and a report from a study's runs."""

from __future__ import annotations

import math
from pathlib import Path

import typer
import yaml
from rich.console import Console
from rich.table import Table

from vitscale.cli.app import app
from vitscale.cli.console import stdout_console
from vitscale.cli.registrations import print_registrations
from vitscale.errors import UserError
from vitscale.kinds import study_kind
from vitscale.tracking import store
from vitscale.tracking.layout import DEFAULT_TRACKING_URI

STUDY_FOLDERS = (".", "studies")  # where a bare file name (`tuned_quickstart`) is looked for


def study_file(name: str) -> Path | None:
    """The study YAML a bare name means when it is a file's name rather than a study's
    (`tuned_quickstart` -> studies/tuned_quickstart.yaml, whose `name:` is tuned-quickstart)."""
    if Path(name).suffix in (".yaml", ".yml") or "/" in name:
        return None
    for folder in STUDY_FOLDERS:
        for suffix in (".yaml", ".yml"):
            path = Path(folder) / f"{name}{suffix}"
            if path.is_file():
                return path
    return None


def resolve_study(study: str) -> tuple[str, str | None, str | None]:
    """(name, tracking uri, experiment) from a study name, a study file's name (`study_file`) or a
    path to its YAML (`name:`, `tracking:`)."""
    path = Path(study)
    if path.suffix not in (".yaml", ".yml"):
        found = study_file(study)
        if found is None:
            return study, None, None
        path, study = found, str(found)
    if not path.is_file():
        raise UserError(f"{study}: no such study file; pass a study name or the path to its YAML")
    try:
        doc = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise UserError(f"{study}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("name"), str):
        raise UserError(f"{study}: the study file has no `name:`; add one or pass the study name")
    tracking = doc.get("tracking") if isinstance(doc.get("tracking"), dict) else {}
    return doc["name"], tracking.get("uri"), tracking.get("experiment")


def _fmt(value, scale: float = 1.0, digits: int = 2, signed: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value * scale:{'+' if signed else ''}.{digits}f}"


# Where every arm holds one configuration its best is its mean over runs: one column, plainly named.
ONE_CONFIGURATION_HEADERS = {"best_top1": "val top-1 (%)", "params": "params"}


def summary_table(result) -> Table:
    """Per mixer x regime (benchmarks: per series): the headline numbers, in the columns the study
    kind's analysis names (`AnalysisKind.summary_columns`). Validation chose: test is in the
    verdicts and the report."""
    rows = result.summary()
    columns = list(result.summary_columns)
    keys = {key for key, *_ in columns}
    title = f"{result.study}: {study_kind(result.kind).summary_title} summary"
    if "best_top1" in keys:
        title += " (validation top-1: a configuration's mean over its seeds)"
    if "mean_top1" in keys and not any(row.get("configs", 1) > 1 for row in rows):
        columns = [
            (key, ONE_CONFIGURATION_HEADERS.get(key, header), scale, spec)
            for key, header, scale, spec in columns
            if key != "mean_top1"
        ]
    table = Table(title=title)
    table.min_width = len(title)  # the title on one line, where the console is wide enough
    for key, header, _, _ in columns:
        table.add_column(header, justify="left" if key in ("series", "mixer", "regime") else "right")
    for row in rows:
        table.add_row(*(_cell(row.get(key), scale, spec) for key, _, scale, spec in columns))
    return table


def _cell(value, scale: float, spec: str) -> str:
    """One summary value: as it is (names, counts), or scaled and formatted; — where missing."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return str(value) if not spec else f"{value * scale:{spec}}"


def comparison_lines(c, note: str = "") -> list[str]:
    """One comparison in lines that fit 80 columns: verdict (with its convergence `note`: 'still
    improving: ssog · ode'), Δ test (t and bootstrap), Δ val."""
    j = c.test
    p = f" (p={j.p_holm:.2g} Holm, k={j.family})" if j.claim else ""
    t = f"{_fmt(j.t.mean, 100, 2, signed=True)}" + (
        f" ± {_fmt(j.t.ci95, 100, 2)}" if math.isfinite(j.t.ci95) else ""
    )
    verdict = f"{c.verdict}{p}" + (f" ({note})" if note else "")
    head = f"{c.shown}: {verdict}"
    lines = [head] if len(head) <= 80 else [f"{c.shown}:", f"  {verdict}"]
    lines.append(f"  Δ test {t} (t, n={j.t.n} seeds)")
    if j.boot is not None:
        b = j.boot
        lines.append(
            f"  Δ test {_fmt(b.mean, 100, 2, signed=True)} [{_fmt(b.low, 100, 2, signed=True)}, "
            f"{_fmt(b.high, 100, 2, signed=True)}] (bootstrap, {b.over}: {b.n_images} images)"
        )
    if c.val is not None:
        ci = f" ± {_fmt(c.val.ci95, 100, 2)}" if math.isfinite(c.val.ci95) else ""
        lines.append(f"  Δ val  {_fmt(c.val.mean, 100, 2, signed=True)}{ci} (n={c.val.n}, information only)")
    return lines


@app.command("analyze")
def analyze_command(
    study: str = typer.Argument(
        ..., help="study name, or the path to its YAML (its `name:` and `tracking:` are used)"
    ),
    tracking_uri: str | None = typer.Option(
        None,
        "--tracking-uri",
        help=f"MLflow store (default: the study file's tracking.uri, else {DEFAULT_TRACKING_URI})",
    ),
    out: Path | None = typer.Option(None, "--out", help="output directory (default: reports/STUDY/)"),
    from_parquet: Path | None = typer.Option(
        None, "--from", help="redraw offline from a runs.parquet snapshot (MLflow is not contacted)"
    ),
    n_boot: int = typer.Option(1000, "--bootstrap", min=0, help="bootstrap resamples for the fit CIs"),
    incomplete: str = typer.Option(
        "drop",
        "--incomplete",
        help="failed / stopped-early / killed runs in arm means and Δ: `drop` them, or score them as "
        "`chance` (1 / classes); either way they are counted, and the report says which was used",
    ),
    margin: float = typer.Option(
        1.0,
        "--margin",
        metavar="POINTS",
        help="equivalence margin of the verdicts on test, in points of top-1: two arms are "
        "'equivalent within ±POINTS' when the 90 % interval of Δ lies inside it (TOST)",
    ),
    converged_threshold: float = typer.Option(
        0.5,
        "--converged-threshold",
        metavar="POINTS",
        help="an arm whose mean validation top-1 gained more than POINTS over the last quarter of "
        "training (by images seen) is marked 'still improving' beside every verdict it is in",
    ),
    register: bool = typer.Option(
        False,
        "--register",
        help="register each arm's best model (by validation) in the MLflow Model Registry as "
        "models:/<study>-<arm>@best",
    ),
    throughput_from: str | None = typer.Option(
        None,
        "--throughput-from",
        metavar="BENCHMARK_STUDY",
        help="benchmark study of the same model configs whose images/s place accuracy-at-resolution "
        "on the accuracy–throughput front (default: the study's analysis.throughput_from)",
    ),
) -> None:
    """Turn a study's runs into Pareto fronts, scaling-law fits, figures and report.md."""
    from vitscale.analysis import convergence_note, front_lines, pipeline  # lazy: matplotlib, scipy, pyarrow

    name, spec_uri, experiment = resolve_study(study)
    if register and from_parquet is not None:
        raise UserError("--register: registers models in MLflow; it cannot be used with --from (offline)")
    console = stdout_console()
    result = pipeline.analyze(
        name,
        tracking_uri or spec_uri,
        out,
        from_parquet,
        experiment=experiment,
        n_boot=n_boot,
        incomplete=incomplete,
        margin=margin,
        converged_threshold=converged_threshold,
        throughput_from=throughput_from,
        console=Console(stderr=True),
    )
    c = result.counts()
    console.print(summary_table(result))
    confirmation = f", {c['confirmation']} confirmation" if c["confirmation"] else ""
    phases = (
        f" ({c['tuning']} tuning{confirmation}, {c['final']} final; the table and Δ use the final runs)"
        if c["final"]
        else ""
    )
    console.print(
        study_kind(result.kind).cli_counts.format(
            **c, phases=phases, killed_or_other=c["killed"] + c["other"]
        )
    )
    if result.comparisons:
        console.print(f"Verdicts on test (margin ±{margin:g} point, incomplete runs: {incomplete}):")
    for c in result.comparisons:
        for line in comparison_lines(c, convergence_note([c.candidate, c.reference], result.convergence)):
            console.print(line, highlight=False)
    front = front_lines(result)
    if front:
        console.print("Accuracy–throughput front over resolutions (test top-1, inference img/s):")
        for line in front:
            console.print(f"  {line}", highlight=False)
    elif result.resolution_points and result.throughput_note:
        console.print(f"No accuracy–throughput front: {result.throughput_note}", highlight=False)
    console.print(f"report:  {result.report_path}")
    console.print(f"figures: {result.out_dir / 'figures'}/ ({len(result.figure_paths)} files)")
    console.print(f"data:    {result.runs_path} (redraw offline with --from), {result.fits_path.name}")
    for path in result.front_paths.values():
        console.print(f"front:   {path.name}")
    if result.logged_to:
        console.print(f"logged to MLflow run {result.logged_to} (artifacts/analysis)")
    if register:
        print_registrations(store.resolve_tracking_uri(tracking_uri, spec_uri), name, experiment)
