"""`vitscale study run / resume / submit / logs / status`: studies on Ray Tune, tracked in MLflow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from vitscale.cli.app import study_app
from vitscale.cli.study_cmd import SetOption
from vitscale.study import load_study
from vitscale.tracking import layout, store

AddressOption = Annotated[
    str | None,
    typer.Option(
        help="Ray cluster to join: auto, HOST:PORT or ray://HOST:10001; default: in-process local Ray"
    ),
]
ResumeAddressOption = Annotated[
    str | None,
    typer.Option(
        help="Ray cluster to join (auto, HOST:PORT, ray://HOST:10001), or a job server "
        "(http://HEAD:8265): then the resume runs there as a Ray job, on the cluster's storage"
    ),
]
TrackingOption = Annotated[
    str | None, typer.Option("--tracking-uri", help="MLflow tracking URI; default: the study's tracking.uri")
]
StorageOption = Annotated[str | None, typer.Option(help="Ray results folder; default: the study's storage")]
CpusOption = Annotated[int | None, typer.Option("--num-cpus", help="CPUs of the in-process local Ray")]
AutoscaleOption = Annotated[
    bool, typer.Option("--allow-autoscale", help="skip the resource preflight (autoscaling clusters)")
]
JobAddressOption = Annotated[
    str | None,
    typer.Option("--address", help="Ray job server, e.g. http://HEAD:8265 (default: the last used)"),
]


@study_app.command("run")
def run(
    file: Annotated[Path, typer.Argument(help="study YAML")],
    address: AddressOption = None,
    tracking_uri: TrackingOption = None,
    storage: StorageOption = None,
    set_: SetOption = None,
    num_cpus: CpusOption = None,
    allow_autoscale: AutoscaleOption = False,
    quiet: Annotated[bool, typer.Option(help="hide Ray Tune's status table")] = False,
    continue_: Annotated[
        bool,
        typer.Option(
            "--continue",
            help="sampler studies: draw search.num_samples more points in the newest execution's "
            "Optuna study, learning from all its earlier trials",
        ),
    ] = False,
) -> None:
    """Run every trial of a study on Ray Tune; every trial lands in MLflow."""
    from vitscale.tune.run import run_study  # lazy: Ray, MLflow

    spec = load_study(file, set_ or ())
    summary = run_study(
        spec,
        address=address,
        tracking_uri=tracking_uri,
        storage=storage,
        num_cpus=num_cpus,
        allow_autoscale=allow_autoscale,
        verbose=0 if quiet else 1,
        source=str(file),
        continue_search=continue_,
    )
    print_summary(summary)


@study_app.command("resume")
def resume(
    target: Annotated[str, typer.Argument(help="study name, study YAML, or an execution folder")],
    address: ResumeAddressOption = None,
    storage: StorageOption = None,
    num_cpus: CpusOption = None,
    allow_autoscale: AutoscaleOption = False,
    quiet: Annotated[bool, typer.Option(help="hide Ray Tune's status table")] = False,
) -> None:
    """Continue the newest execution of a study whose driver died; finishes its planned trials."""
    from vitscale.tune.submit import is_job_server, submit_resume  # lazy: Ray

    if is_job_server(address):
        print(submit_resume(target, address, storage, allow_autoscale))  # the job id
        return
    from vitscale.tune.run import resume_study  # lazy: Ray

    summary = resume_study(
        target,
        address=address,
        storage=storage,
        num_cpus=num_cpus,
        allow_autoscale=allow_autoscale,
        verbose=0 if quiet else 1,
    )
    print_summary(summary)


@study_app.command("submit")
def submit(
    file: Annotated[Path, typer.Argument(help="study YAML inside this project")],
    address: Annotated[str, typer.Option("--address", help="Ray job server, e.g. http://HEAD:8265")],
    tracking_uri: TrackingOption = None,
    set_: SetOption = None,
) -> None:
    """Submit the study as a Ray job on a remote cluster and print its job id."""
    from vitscale.tune.submit import submit as submit_job  # lazy: Ray

    spec = load_study(file, set_ or ())
    uri = store.resolve_tracking_uri(tracking_uri, spec.tracking.uri)
    store.check_tracking_uri(uri, remote_driver=True)
    job_id = submit_job(file, address, uri, list(set_ or ()), spec)
    print(job_id)


@study_app.command("logs")
def logs(
    job_id: Annotated[str, typer.Argument(help="job id printed by `study submit`")],
    address: JobAddressOption = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="stream until the job ends")] = False,
) -> None:
    """Print a submitted study's driver log."""
    from vitscale.tune.submit import logs as job_logs  # lazy: Ray

    job_logs(address, job_id, follow)


@study_app.command("status")
def status(
    job_id: Annotated[str | None, typer.Argument(help="one job; default: every job")] = None,
    address: JobAddressOption = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow server for progress when a job does not name one"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON")] = False,
) -> None:
    """Submitted studies, one line each: job id, study, status, start, duration, trials done/planned."""
    from vitscale.tune.jobs import lines, status  # lazy: Ray

    rows = status(address, job_id, tracking_uri)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    width = shutil.get_terminal_size((100, 24)).columns
    print("\n".join(lines(rows, width)))


def print_summary(summary) -> None:
    """Counts, then the best trial or the Pareto set, then where to look next."""
    console = Console()
    counts = summary.counts
    console.print(
        f"[bold]{summary.study}[/]: {counts['total']} trials — {counts['finished']} finished, "
        f"{counts['stopped_early']} stopped early, {counts['failed']} failed"
        + (f", {counts['killed']} killed" if counts["killed"] else "")
    )
    failed = [t for t in summary.trials if t.status == "FAILED"]
    for trial in failed[:10]:
        console.print(f"  failed {trial.name}: {trial.failure_reason}")
    if summary.best:
        title = "best trial" if len(summary.objectives) == 1 else "Pareto set"
        table = Table(title=title)
        table.add_column("trial")
        for metric, mode in summary.objectives:
            table.add_column(f"{metric} ({mode})", justify="right")
        for trial in summary.best:
            table.add_row(trial.name, *(f"{trial.metrics[m]:.4g}" for m, _ in summary.objectives))
        console.print(table)
    if getattr(summary, "arms", None):
        console.print(arm_table(summary.arms))
    if getattr(summary, "tracking", ""):
        console.print(summary.tracking)
    console.print(
        f"MLflow: experiment {summary.experiment_id}, parent run {summary.parent_run_id} — "
        f"`vitscale ui --tracking-uri {summary.tracking_uri}`; figures: `vitscale analyze {summary.study}`"
    )


def arm_table(rows: list[dict]) -> Table:
    """Comparison studies: each arm's tuned config (chosen on validation) and its final runs."""
    table = Table(
        title="arms: tuned on validation, then re-run per final seed (top-1 %; val, test: final runs' mean)"
    )
    # The arm names the row and the numbers are short: neither is cut. The config takes the rest,
    # one parameter per line.
    table.add_column("arm", no_wrap=True)
    table.add_column("tuned config", overflow="fold", ratio=1)
    for column in ("tuning val", "runs", "val", "test"):
        table.add_column(column, justify="right", no_wrap=True)

    def pct(value) -> str:
        return "—" if value is None else f"{100 * value:.2f}"

    for row in rows:
        point = row["point"]
        config = (
            "\n".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in point.items()) if point else "none"
        )
        table.add_row(
            layout.arm_display(row["arm"], "/"),  # attention/ode
            config,
            pct(row["tuning_score"]),
            str(row["final_runs"]),
            pct(row["val_top1"]),
            pct(row["test_top1"]),
        )
    return table


def _short(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)
