"""`vitscale ui`: the MLflow UI for a study's store, on 127.0.0.1.

The server is a child process (`cli.local_server`: URL printed once it answers, Ctrl-C stops
it without a traceback). It runs one worker (a local UI has one user; MLflow's default four start four times slower and
print every warning four times) and without the deprecation warning MLflow's server triggers at
import (`starlette.middleware.wsgi`), which is MLflow's to fix, not the user's.
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.cli.local_server import serve
from vitscale.errors import UserError
from vitscale.tracking.layout import DEFAULT_TRACKING_URI

RUNS_PAGE = "#/experiments?workflowType=machine_learning"
# PYTHONWARNINGS entries the server starts with: MLflow's server imports a Starlette module
# Starlette deprecated; one warning per worker process, nothing the user can act on.
SERVER_WARNING_FILTERS = ("ignore:starlette.middleware.wsgi is deprecated",)


def uri_is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))


def server_command(mlflow: str, tracking_uri: str, host: str, port: int) -> list[str]:
    """`mlflow ui` with one worker and no per-request access log (the terminal stays readable)."""
    return [
        mlflow, "ui", "--backend-store-uri", tracking_uri, "--host", host, "--port", str(port),
        "--workers", "1", "--uvicorn-opts", "--no-access-log",
    ]  # fmt: skip


def server_env() -> dict[str, str]:
    """The environment with SERVER_WARNING_FILTERS added to the user's own PYTHONWARNINGS, and
    MLflow's job runner off unless the user turned it on: it serves GenAI features (online
    scoring, trace archival), starts three more processes and holds up Ctrl-C for half a minute."""
    env = dict(os.environ)
    env.setdefault("MLFLOW_SERVER_ENABLE_JOB_EXECUTION", "false")
    given = [w for w in env.get("PYTHONWARNINGS", "").split(",") if w]
    env["PYTHONWARNINGS"] = ",".join([*given, *SERVER_WARNING_FILTERS])
    return env


@app.command("ui")
def ui(
    tracking_uri: Annotated[str, typer.Option(help="the store to show")] = DEFAULT_TRACKING_URI,
    port: Annotated[int, typer.Option(help="port on 127.0.0.1")] = 5000,
    host: Annotated[str, typer.Option(help="interface; 0.0.0.0 exposes it to the network")] = "127.0.0.1",
) -> None:
    """Open the MLflow UI (parent run per study, child run per trial) for a local store."""
    if uri_is_server(tracking_uri):
        print(f"{tracking_uri} is a tracking server: open it in a browser.")
        return
    if tracking_uri.startswith("sqlite:///"):
        path = tracking_uri.removeprefix("sqlite:///")
        if not os.path.exists(path):
            raise UserError(f"--tracking-uri: {path} does not exist; run a study first (`make demo`)")
    mlflow = shutil.which("mlflow") or os.path.join(os.path.dirname(sys.executable), "mlflow")
    local = "127.0.0.1" if host in ("0.0.0.0", "::") else host
    print(f"starting the MLflow UI for {tracking_uri} ...", flush=True)
    # MLflow 3.x opens on its GenAI pages unless the URL (or the browser's last choice) asks for
    # model training; the experiments vitscale makes are also tagged so (tracking.layout).
    serve(
        server_command(mlflow, tracking_uri, host, port),
        env=server_env(),
        health_url=f"http://{local}:{port}/health",
        ready_line=f"MLflow UI on http://{host}:{port}/{RUNS_PAGE} (Ctrl-C stops it)",
        name="the MLflow server",
    )
