"""A local web server (the MLflow UI, optuna-dashboard) run as a child of the CLI.

Its URL is printed once it answers HTTP: MLflow takes tens of seconds to start, and a URL that
refuses connections looks broken. The server runs in its own process group, so the terminal's
Ctrl-C reaches only the CLI, which stops the group with SIGTERM: a forwarded SIGINT makes uvicorn
re-raise it after its own shutdown, and asyncio then prints a KeyboardInterrupt traceback through
the app's lifespan task.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.error
import urllib.request

import typer

from vitscale.errors import UserError

STARTUP_TIMEOUT_S = 300.0  # a busy 2-core machine takes ~20 s for MLflow
SHUTDOWN_GRACE_S = 30.0


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


def wait_until_serving(
    process: subprocess.Popen, url: str, timeout_s: float, name: str, poll_s: float = 0.5
) -> None:
    """Return when `url` answers; raise UserError if the server exits or never answers."""
    deadline = time.monotonic() + timeout_s
    while not answers_http(url):
        if process.poll() is not None:
            raise UserError(
                f"{name} exited ({process.returncode}) before it answered at {url}; "
                "its messages are above (a port in use? pass --port)"
            )
        if time.monotonic() > deadline:
            stop(process, grace_s=0)
            raise UserError(f"{name} did not answer at {url} within {timeout_s:.0f} s")
        time.sleep(poll_s)


def serve(
    command: list[str], env: dict[str, str] | None, health_url: str, ready_line: str, name: str
) -> None:
    """Run `command` until it exits or Ctrl-C; print `ready_line` once `health_url` answers."""
    process = subprocess.Popen(command, env=env, start_new_session=True)
    try:
        wait_until_serving(process, health_url, STARTUP_TIMEOUT_S, name)
        print(ready_line, flush=True)
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
