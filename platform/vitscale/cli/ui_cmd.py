"""`vitscale ui`: the MLflow UI for a study's store, on 127.0.0.1."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.errors import UserError
from vitscale.tracking.layout import DEFAULT_TRACKING_URI


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
    # MLflow 3.x opens on its GenAI pages unless the URL (or the browser's last choice) asks for
    # model training; the experiments vitscale makes are also tagged so (tracking.layout).
    print(f"MLflow UI on http://{host}:{port}/{RUNS_PAGE} (Ctrl-C stops it)", flush=True)
    os.execv(mlflow, [mlflow, "ui", "--backend-store-uri", tracking_uri, "--host", host, "--port", str(port)])


RUNS_PAGE = "#/experiments?workflowType=machine_learning"


def uri_is_server(uri: str) -> bool:
    return uri.startswith(("http://", "https://"))
