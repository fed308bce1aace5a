"""`vitscale study run / resume / submit / logs / status`: studies on Ray Tune, tracked in MLflow."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from vitscale.bench.contention import contention_caveat
from vitscale.cli.app import study_app
from vitscale.cli.console import stdout_console
from vitscale.cli.registrations import print_registrations
from vitscale.cli.study_cmd import SetOption
from vitscale.errors import UserError
from vitscale.study import load_study
from vitscale.tracking import layout, store
from vitscale.tune import local_status  # light: no Ray, no MLflow (each execution's progress record)

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
CpusOption = Annotated[
    int | None,
    typer.Option(
        "--num-cpus",
        help="CPUs of the in-process local Ray (default: the cores; trials whose threads would exceed the cores are refused)",
    ),
]
AutoscaleOption = Annotated[
    bool, typer.Option("--allow-autoscale", help="skip the resource preflight (autoscaling clusters)")
]
IncludeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--include",
        help="an untracked file or folder of the project to upload too (repeatable); "
        "a submitted job gets only what git tracks, the study file, and these",
    ),
]
QuietOption = Annotated[
    bool, typer.Option(help="no Ray Tune status table (the default); the progress lines stay")
]
VerboseOption = Annotated[
    bool, typer.Option("--verbose", help="Ray Tune's status table too, every 15 s, beside the progress lines")
]
RegisterOption = Annotated[
    bool,
    typer.Option(
        "--register",
        help="register each arm's best model (by validation) in the MLflow Model Registry as "
        "models:/<study>-<arm>@best",
    ),
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
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    continue_: Annotated[
        bool,
        typer.Option(
            "--continue",
            help="sampler studies: draw search.num_samples more points in the newest execution's "
            "Optuna study, learning from all its earlier trials",
        ),
    ] = False,
    register: RegisterOption = False,
) -> None:
    """Run every trial of a study on Ray Tune; every trial lands in MLflow."""
    spec = load_study(file, set_ or ())
    print(starting_line(spec.name, address), flush=True)
    from vitscale.tune.run import run_study  # lazy: Ray, MLflow (seconds: hence the line above first)

    summary = run_study(
        spec,
        address=address,
        tracking_uri=tracking_uri,
        storage=storage,
        num_cpus=num_cpus,
        allow_autoscale=allow_autoscale,
        verbose=int(verbose and not quiet),
        source=str(file),
        continue_search=continue_,
    )
    print_summary(summary)
    if register:
        print_registrations(summary.tracking_uri, spec.name, spec.tracking.experiment)


@study_app.command("resume")
def resume(
    target: Annotated[str, typer.Argument(help="study name, study YAML, or an execution folder")],
    address: ResumeAddressOption = None,
    storage: StorageOption = None,
    num_cpus: CpusOption = None,
    allow_autoscale: AutoscaleOption = False,
    quiet: QuietOption = False,
    verbose: VerboseOption = False,
    include: IncludeOption = None,
) -> None:
    """Continue the newest execution of a study whose driver died; finishes its planned trials."""
    from vitscale.tune.submit import is_job_server, submit_resume  # lazy: Ray

    if is_job_server(address):
        print(submit_resume(target, address, storage, allow_autoscale, list(include or ())))  # the job id
        return
    if include:
        raise UserError("--include: only for a resume that runs as a Ray job (--address http://HEAD:8265)")
    print(starting_line(target, address), flush=True)
    from vitscale.tune.run import resume_study  # lazy: Ray (seconds: hence the line above first)

    summary = resume_study(
        target,
        address=address,
        storage=storage,
        num_cpus=num_cpus,
        allow_autoscale=allow_autoscale,
        verbose=int(verbose and not quiet),
    )
    print_summary(summary)


@study_app.command("submit")
def submit(
    file: Annotated[Path, typer.Argument(help="study YAML inside this project")],
    address: Annotated[str, typer.Option("--address", help="Ray job server, e.g. http://HEAD:8265")],
    tracking_uri: TrackingOption = None,
    set_: SetOption = None,
    include: IncludeOption = None,
) -> None:
    """Submit the study as a Ray job on a remote cluster and print its job id. The job gets the files
    git tracks (uncommitted edits included), the study file and --include paths, nothing else."""
    from vitscale.tune.submit import submit as submit_job  # lazy: Ray

    spec = load_study(file, set_ or ())
    uri = store.resolve_tracking_uri(tracking_uri, spec.tracking.uri)
    store.check_tracking_uri(uri, remote_driver=True)
    job_id = submit_job(file, address, uri, list(set_ or ()), spec, list(include or ()))
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
    target: Annotated[
        str | None,
        typer.Argument(help="a local study's name, or with --address one job; default: every study (job)"),
    ] = None,
    address: Annotated[
        str | None,
        typer.Option(
            "--address",
            help="Ray job server, e.g. http://HEAD:8265: list submitted studies; "
            "default: the studies of this machine's storage folder",
        ),
    ] = None,
    storage: Annotated[
        str | None, typer.Option(help="local studies: the Ray results folder; default ./ray_results")
    ] = None,
    tracking_uri: Annotated[
        str | None,
        typer.Option("--tracking-uri", help="MLflow server for progress when a job does not name one"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (jobs)")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="local studies: refresh until Ctrl-C")] = False,
    every: Annotated[float, typer.Option(help="with --watch: seconds between refreshes", min=1)] = 10.0,
) -> None:
    """Where studies stand. Here: one progress line per study of the storage folder (done / running /
    failed / planned, best by seed mean, last change, ETA). With --address: submitted jobs, one line
    each (job id, study, status, start, duration, trials done/planned)."""
    if address is None:

        def render() -> str:
            return "\n".join(study.line() for study in local_status.local_studies(storage, target))

        if watch:
            local_status.watch(render, every)
        else:
            print(render())
        return
    from vitscale.tune import jobs  # lazy: Ray, MLflow

    rows = jobs.status(address, target, tracking_uri)
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    width = shutil.get_terminal_size((100, 24)).columns
    print("\n".join(jobs.lines(rows, width)))


def starting_line(study: str, address: str | None) -> str:
    """Printed at once: importing Ray, Tune and MLflow and starting Ray take half a minute on a
    busy laptop, before the first progress line."""
    where = f"the Ray cluster at {address}" if address else "Ray in this process"
    return f"{study}: starting {where} ..."


def print_summary(summary) -> None:
    """Counts, then the best configuration by seed mean (or the fronts per resolution), then
    where to look next."""
    console = stdout_console()
    counts = summary.counts
    console.print(
        f"[bold]{summary.study}[/]: {counts['total']} trials — {counts['finished']} finished, "
        f"{counts['stopped_early']} stopped early, {counts['failed']} failed"
        + (f", {counts['killed']} killed" if counts["killed"] else "")
    )
    failed = [t for t in summary.trials if t.status == "FAILED"]
    for trial in failed[:10]:
        console.print(f"  failed {trial.name}: {trial.failure_reason}")
    arms = getattr(summary, "arms", None)  # a study run in arms (tune.comparison): None otherwise
    if arms:
        console.print(arm_table(arms))
    if arms is not None:  # the best arm by its final runs
        console.print(best_arm_line(summary))
    else:
        for resolution, configs in summary.best.items():
            console.print(best_table(configs, summary.objectives, _best_title(summary, resolution)))
    # the report's caveat on a benchmark's timings, in its words (trials that time nothing: None)
    ratios = [t.metrics.get("cpu_wall_ratio") for t in summary.trials if t.status == "FINISHED"]
    caveat = contention_caveat(ratios)
    if caveat and not caveat.startswith("None"):
        console.print(f"Contended timings: {caveat}", highlight=False)
    if getattr(summary, "tracking", ""):
        console.print(summary.tracking)
    console.print(
        f"MLflow: experiment {summary.experiment_id}, parent run {summary.parent_run_id} — "
        f"`vitscale ui --tracking-uri {summary.tracking_uri}`; figures: `vitscale analyze {summary.study}`"
    )
    view = layout.saved_view_url(summary.experiment_id, summary.study)
    console.print(f"runs with the key metrics: {ui_address(summary.tracking_uri)}/{view}", soft_wrap=True)
    if summary.directory:
        console.print(f"execution folder: {summary.directory}", soft_wrap=True)


def _best_title(summary, resolution) -> str:
    what = "Pareto front" if len(summary.objectives) > 1 else "best configuration"
    where = f" at {resolution} px" if resolution is not None else ""
    return f"{what}{where} by the mean over seeds (n each)"


def best_arm_line(summary) -> str:
    """A comparison's best arm by its final runs' seed mean (fresh seeds, never a tuning run)."""
    metric = summary.objectives[0][0]
    best = [c for configs in summary.best.values() for c in configs]
    if not best:
        return f"best arm: none (no arm has finished final runs with {metric})"
    arm = best[0]
    values = ", ".join(
        f"{m} {arm.means[m]:.4g}" for m in dict.fromkeys([metric, "test_top1"]) if m in arm.means
    )
    return f"best arm by its final runs' seed mean: [bold]{arm.label}[/] — {values} (n={arm.n})"


def best_table(configs, objectives: list[tuple[str, str]], title: str) -> Table:
    """Configurations with n and their seed means: the objectives, then test where measured."""
    metrics = [m for m, _ in objectives]
    extra = [m for m in ("test_top1",) if m not in metrics and any(m in c.means for c in configs)]
    table = Table(title=title)
    table.add_column("configuration", overflow="fold")
    table.add_column("n", justify="right", no_wrap=True)
    for metric, mode in objectives:
        table.add_column(f"{metric} ({mode})", justify="right", no_wrap=True)
    for metric in extra:
        table.add_column(metric, justify="right", no_wrap=True)
    for config in configs:
        values = [f"{config.means[m]:.4g}" if m in config.means else "—" for m in metrics + extra]
        table.add_row(config.label, str(config.n), *values)
    return table


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
        if row.get("budget"):  # a compute budget: what this arm's search spent (tune.budget)
            config += f"\n{row['budget']}"
        table.add_row(
            layout.arm_display(row["arm"], "/"),  # attention/ode: narrow, the config gets the room
            config,
            pct(row["tuning_score"]),
            str(row["final_runs"]),
            pct(row["val_top1"]),
            pct(row["test_top1"]),
        )
    return table


def _short(value) -> str:
    """A value in a narrow column: floats in 3 digits, a PBT member's schedule as its steps."""
    if isinstance(value, float):
        return f"{value:.3g}"
    if isinstance(value, list) and value and all(isinstance(s, dict) and "epoch" in s for s in value):
        return "; ".join(
            f"e{step['epoch']}: "
            + ", ".join(f"{k.rsplit('.', 1)[-1]}={_short(v)}" for k, v in step["values"].items())
            for step in value
        )
    return str(value)


def ui_address(tracking_uri: str) -> str:
    """Where the MLflow UI of a store answers: the server itself, else `vitscale ui`'s default."""
    return (
        tracking_uri.rstrip("/")
        if tracking_uri.startswith(("http://", "https://"))
        else "http://127.0.0.1:5000"
    )
