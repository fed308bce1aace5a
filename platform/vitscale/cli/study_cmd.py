"""`vitscale study validate` and `vitscale study show`, and the `--set` option every study command shares.

Other study commands (run, resume, submit...) reuse the option:

    from vitscale.cli.study_cmd import SetOption

    @study_app.command()
    def run(file: Path, set_: SetOption = None) -> None:
        spec = load_study(file, set_ or ())
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vitscale.cli.app import study_app
from vitscale.kinds import study_kind
from vitscale.study import (
    SpecError,
    apply_overrides,
    count_trials,
    grid_points,
    is_space_file,
    load_space,
    load_study,
    read_study,
    spec_dict,
    spec_hash,
    validate_study,
    yamlio,
)
from vitscale.study.comparison import arm_list
from vitscale.study.defaults import run_defaults
from vitscale.study.plan import planned_trials
from vitscale.tune.comparison_record import record_json, record_lines

SetOption = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        metavar="PATH=VALUE",
        help="Override a key of the study after extends, e.g. --set trial.train.epochs=2 "
        "or --set 'space.model.width={choice: [32]}'; the value is YAML; repeatable.",
    ),
]

FilesArgument = Annotated[list[Path], typer.Argument(help="study or search-space YAML files")]


def trials_line(spec) -> str:
    """'12 trials = 12 grid points x 1 seed': how a study expands; with a compute budget, the most
    it can run and when its search (each arm's) stops."""
    compute = spec.search.budget.compute if spec.search.budget is not None else None
    line = _expansion(spec)
    return f"at most {line}, each search until {compute[1]:g} {compute[0]} are spent" if compute else line


def _expansion(spec) -> str:

    def n(count: int, noun: str) -> str:
        return f"{count} {noun}{'' if count == 1 else 's'}"

    kind = study_kind(spec.kind)
    if kind.phased:
        tuning, confirmation, final = planned_trials(spec)
        arms = len(arm_list(spec))
        fidelity = spec.search.fidelity
        at = f" at {', '.join(f'{k}={v}' for k, v in fidelity.items())}" if fidelity else ""
        if spec.tuned_from:
            return (
                f"{n(final, 'trial')} = {n(arms, 'arm')} x {n(len(spec.final.seeds), 'final seed')}, "
                f"each arm at the point {spec.tuned_from} tuned for it (no tuning here)"
            )
        # every arm has the same budget: the same number of points to confirm
        confirmed = f" + {n(confirmation // arms, 'confirmation run')}" if confirmation else ""
        return (
            f"{n(tuning + confirmation + final, 'trial')} = {n(arms, 'arm')} x "
            f"({n(tuning // arms, 'tuning trial')}{at}{confirmed}"
            f" + {n(len(spec.final.seeds), 'final seed')} at full fidelity)"
        )
    if spec.search.algorithm == "grid":  # a benchmark: its configurations
        what = n(len(grid_points(spec)), kind.points_noun)
    else:
        what = n(spec.search.num_samples, f"{spec.search.algorithm} sample")
    return f"{n(count_trials(spec), 'trial')} = {what} x {n(len(spec.search.seeds), 'seed')}"


def check_file(path: Path, overrides: list[str] | tuple = ()) -> str:
    """Validate one study or search-space file; the OK summary, or SpecError."""
    if is_space_file(yamlio.read(path)):
        space = load_space(path)
        return f"search space, {len(space)} parameter{'' if len(space) == 1 else 's'}"
    spec = load_study(path, overrides)
    return f"study {spec.name} ({spec.kind}, {spec.search.algorithm}): {trials_line(spec)}"


@study_app.command("validate")
def validate(files: FilesArgument, set_: SetOption = None) -> None:
    """Check study and search-space files; every problem of every file, one line each."""
    problems: list[str] = []
    for path in files:
        try:
            typer.echo(f"OK {path}: {check_file(path, set_ or ())}")
        except SpecError as exc:
            problems += exc.lines
    if problems:
        raise SpecError(problems)


@study_app.command("show")
def show(
    file: Annotated[Path, typer.Argument(help="study YAML file")],
    set_: SetOption = None,
    as_json: Annotated[bool, typer.Option("--json", help="print JSON (spec, trials, points, hash)")] = False,
) -> None:
    """Print the resolved study (after extends, includes and --set), how many trials it runs, and
    what its nulls become as trials run (the recipe, threads, LayerScale, position embedding); for
    a comparison that ran here, its newest execution's arms, rank transfer and range-edge flags."""
    raw, files = read_study(file)
    raw, touched = apply_overrides(raw, set_ or ())
    spec = validate_study(raw, str(file), touched)
    data = spec_dict(spec)
    defaults = run_defaults(spec)  # what the nulls become, per variant
    kind = study_kind(spec.kind)
    if as_json:
        report = {
            "spec": data,
            "files": files,
            "spec_hash": spec_hash(spec),
            "trials": count_trials(spec),
            "seeds": spec.search.seeds,
            "grid_points": len(grid_points(spec)) if spec.search.algorithm == "grid" else None,
            "as_run": [{"trials": names, "values": values} for names, values in defaults],
        }
        if kind.phased:
            report["latest_execution"] = record_json(spec)  # after a run: the arms' choices
        typer.echo(json.dumps(report, indent=2))
        return
    typer.echo(f"# {' <- '.join(files)}" + (f"  (--set {', '.join(set_)})" if set_ else ""))
    typer.echo(f"# {trials_line(spec)}; spec hash {spec_hash(spec)}")
    typer.echo(yamlio.dump(data), nl=False)
    if defaults:
        typer.echo("# null above is left to a default; the trials run with (and MLflow logs):")
        for names, values in defaults:
            typer.echo(
                f"#   {', '.join(names)}: " + ", ".join(f"{k}={json.dumps(v)}" for k, v in values.items())
            )
    if kind.phased:  # after a run: each arm's choice, its rank transfer, tuned values at an edge
        for line in record_lines(spec):
            typer.echo(f"# {line}")
