"""`vitscale ui`: the MLflow UI for a study's store, on 127.0.0.1.

The server is a child process in its own process group: its URL is printed once it answers HTTP
(MLflow takes tens of seconds to start, and a URL that refuses connections looks broken), and
Ctrl-C stops both. The terminal's SIGINT does not reach the server: uvicorn re-raises a SIGINT
after its own shutdown, and asyncio turns that into a KeyboardInterrupt traceback through the
app's lifespan task; vitscale sends the group SIGTERM instead, which uvicorn shuts down on cleanly. It
runs one worker (a local UI has one user; MLflow's default four start four times slower and
print every warning four times) and without the deprecation warning MLflow's server triggers at
import (`starlette.middleware.wsgi`), which is MLflow's to fix, not the user's.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import Annotated

import typer

from vitscale.cli.app import app
from vitscale.errors import UserError
from vitscale.tracking.layout import DEFAULT_TRACKING_URI

RUNS_PAGE = "#/experiments?workflowType=machine_learning"
# PYTHONWARNINGS entries the server starts with: MLflow's server imports a Starlette module
# Starlette deprecated; one warning per worker process, nothing the user can act on.
SERVER_WARNING_FILTERS = ("ignore:starlette.middleware.wsgi is deprecated",)
STARTUP_TIMEOUT_S = 300.0  # a busy 2-core machine takes ~20 s
SHUTDOWN_GRACE_S = 30.0


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


def answers_http(url: str, timeout: float = 2.0) -> bool:
    """True once something at `url` answers HTTP (any status: a server is there)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            response.read(0)
        return True
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False


def wait_until_serving(process: subprocess.Popen, url: str, timeout_s: float, poll_s: float = 0.5) -> None:
    """Return when `url` answers; raise UserError if the server exits or never answers."""
    deadline = time.monotonic() + timeout_s
    while not answers_http(url):
        if process.poll() is not None:
            raise UserError(
                f"the MLflow server exited ({process.returncode}) before it answered at {url}; "
                "its messages are above (a port in use? pass --port)"
            )
        if time.monotonic() > deadline:
            stop(process, grace_s=0)
            raise UserError(f"the MLflow server did not answer at {url} within {timeout_s:.0f} s")
        time.sleep(poll_s)


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
    process = subprocess.Popen(
        server_command(mlflow, tracking_uri, host, port), env=server_env(), start_new_session=True
    )
    try:
        wait_until_serving(process, f"http://{local}:{port}/health", STARTUP_TIMEOUT_S)
        # MLflow 3.x opens on its GenAI pages unless the URL (or the browser's last choice) asks for
        # model training; the experiments vitscale makes are also tagged so (tracking.layout).
        print(f"MLflow UI on http://{host}:{port}/{RUNS_PAGE} (Ctrl-C stops it)", flush=True)
        code = process.wait()
    except KeyboardInterrupt:
        stop(process, grace_s=SHUTDOWN_GRACE_S)
        raise
    except BaseException:
        stop(process, grace_s=0)
        raise
    if code:
        raise typer.Exit(code)


def stop(process: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM the server's process group (`mlflow ui` runs uvicorn as its child), give it
    `grace_s` to shut down, then SIGKILL what is left."""
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            return
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
