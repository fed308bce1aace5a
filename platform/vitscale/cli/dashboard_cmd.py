"""`vitscale dashboard STUDY`: optuna-dashboard on a sampler study's Optuna study, on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.errors import UserError


def optuna_storage(target: str, storage: str | None) -> str:
    """The Optuna RDB of the newest execution of `target` (a name, study YAML or execution folder)."""
    # Lazy: vitscale.tune imports Ray.
    from vitscale.tune.optuna_study import execution_storage
    from vitscale.tune.run import locate_execution

    directory = locate_execution(target, storage)
    url = execution_storage(directory)
    if not url:
        raise UserError(f"{target}: its newest execution ({directory}) has no Optuna study (a grid study?)")
    return url


@app.command("dashboard")
def dashboard(
    target: Annotated[str, typer.Argument(help="study name, study YAML, or an execution folder")],
    storage: Annotated[str | None, typer.Option(help="Ray results folder; default: ray_results")] = None,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 8080,
    host: Annotated[str, typer.Option(help="interface; 0.0.0.0 exposes it to the network")] = "127.0.0.1",
) -> None:
    """Open optuna-dashboard (history, importance, parallel coordinates) for a sampler study."""
    url = optuna_storage(target, storage)
    program = shutil.which("optuna-dashboard") or os.path.join(
        os.path.dirname(sys.executable), "optuna-dashboard"
    )
    if not os.path.exists(program):
        raise UserError("optuna-dashboard is not installed; pip install -e '.[dashboard]'")
    print(f"optuna-dashboard on http://{host}:{port} for {url} (Ctrl-C stops it)", flush=True)
    os.execv(program, [program, url, "--host", host, "--port", str(port)])
