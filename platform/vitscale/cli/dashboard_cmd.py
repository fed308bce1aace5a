"""`vitscale dashboard STUDY [--arm A]`: optuna-dashboard on a study's Optuna study, on 127.0.0.1.

A sampler study has one Optuna study; a comparison has one per arm (named `<study>/<arm>`), all in
the execution's one storage, so optuna-dashboard lists every arm side by side; `--arm` opens on
that arm's page. Executions begun before the arms shared a storage keep each arm in its tuning
phase's folder (`tune-<i>/optuna.db`): optuna-dashboard opens one storage, so there the command
opens the arm `--arm` names, by default the first, and says in one line which arms there are.
"""

from __future__ import annotations

import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from vitscale.cli.analyze_cmd import study_file
from vitscale.cli.app import app
from vitscale.cli.local_server import serve
from vitscale.errors import UserError


def execution_folder(target: str, storage: str | None) -> Path:
    """The execution folder `target` names: the folder itself (or one of its comparison phase
    folders, `.../<timestamp>/tune-0`), else the newest execution of a study name or YAML."""
    # Lazy: vitscale.tune imports Ray.
    from vitscale.tune import run

    path, state = Path(target), run.STATE_FILE
    if path.is_dir() and ((path / state).is_file() or (path.parent / state).is_file()):
        return path.resolve()
    found = study_file(target)
    return run.locate_execution(str(found) if found else target, storage)


def choose_study(target: str, storage: str | None, arm: str | None):
    """(the Optuna study to open, a line naming the other arms or None)."""
    from vitscale.tune.optuna_study import dashboard_studies, pick_arm

    directory = execution_folder(target, storage)
    studies = dashboard_studies(directory)
    if not studies:
        raise UserError(
            f"{target}: its newest execution ({directory}) has no Optuna study: a grid or benchmark "
            "study samples nothing (search.algorithm: tpe, random, ... has one)"
        )
    names = ", ".join(s.label for s in studies)
    if arm is not None:
        chosen = pick_arm(studies, arm)
        if chosen is None:
            raise UserError(f"--arm: {arm!r} is not an arm of {target}; its arms: {names}")
        return chosen, None
    if len(studies) == 1:
        return studies[0], None
    if len({s.url for s in studies}) == 1:  # the arms share one storage: the dashboard lists them all
        return replace(studies[0], label=f"{len(studies)} arms", page=""), f"{len(studies)} arms: {names}"
    return studies[0], f"{len(studies)} arms: {names}; showing {studies[0].label} (another: --arm NAME)"


@app.command("dashboard")
def dashboard(
    target: Annotated[str, typer.Argument(help="study name, study YAML, or an execution folder")],
    arm: Annotated[
        str | None,
        typer.Option(help="a comparison's arm, e.g. 'ssog · ode' or ssog/ode (default: the first)"),
    ] = None,
    storage: Annotated[str | None, typer.Option(help="Ray results folder; default: ray_results")] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8080,
    host: Annotated[str, typer.Option(help="interface; 0.0.0.0 exposes it to the network")] = "127.0.0.1",
) -> None:
    """Open optuna-dashboard (history, importance, parallel coordinates) for a sampler study or
    a comparison's arms."""
    study, others = choose_study(target, storage, arm)
    program = shutil.which("optuna-dashboard") or os.path.join(
        os.path.dirname(sys.executable), "optuna-dashboard"
    )
    if not os.path.exists(program):
        raise UserError("optuna-dashboard is not installed; pip install -e '.[dashboard]'")
    if others:
        print(others, flush=True)
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"starting optuna-dashboard for {study.label} ({study.url}) ...", flush=True)
    serve(
        [program, study.url, "--host", host, "--port", str(port)],
        env=None,
        health_url=f"http://{local}:{port}/",
        ready_line=f"optuna-dashboard on http://{host}:{port}/{study.page} for {study.label} (Ctrl-C stops it)",
        name="optuna-dashboard",
    )
