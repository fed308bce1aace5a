"""A local web server (the MLflow UI, optuna-dashboard) run as a child of the CLI.

Its URL is printed once it answers HTTP: MLflow takes tens of seconds to start, and a URL that
refuses connections looks broken. The server runs in its own process group, so the terminal's
Ctrl-C reaches only the CLI, which stops the group with SIGTERM: a forwarded SIGINT makes uvicorn
re-raise it after its own shutdown, and asyncio then prints a KeyboardInterrupt traceback through
the app's lifespan task.

Being in its own session, the server hears no signal meant for the CLI: a `kill` (SIGTERM) or a
closed terminal (SIGHUP) would end the CLI and leave the server listening. So every stop signal
(STOP_SIGNALS, and Ctrl-C) ends the CLI the same way: the server's whole group is stopped first,
and the CLI exits 128 + the signal's number, as a shell reports a process the signal ended.
"""

from __future__ import annotations

import contextlib
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
# Signals that stop the CLI besides Ctrl-C (SIGINT, Python's KeyboardInterrupt): `kill`, a closed terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class StopSignal(Exception):
    """A STOP_SIGNALS signal arrived: the server is to be stopped and the CLI to exit."""

    def __init__(self, number: int) -> None:
        super().__init__(signal.Signals(number).name)
        self.exit_code = 128 + number


@contextlib.contextmanager
def stop_signals_raise():
    """Within: SIGTERM and SIGHUP raise StopSignal (like SIGINT raises KeyboardInterrupt)."""

    def handler(number: int, _frame) -> None:
        raise StopSignal(number)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


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
    """Run `command` until it exits, Ctrl-C or a STOP_SIGNALS signal (each stops its whole group);
    print `ready_line` once `health_url` answers."""
    process = None
    with stop_signals_raise():
        try:
            process = subprocess.Popen(command, env=env, start_new_session=True)
            wait_until_serving(process, health_url, STARTUP_TIMEOUT_S, name)
            print(ready_line, flush=True)
            code = process.wait()
        except KeyboardInterrupt:
            stop(process, grace_s=SHUTDOWN_GRACE_S)
            raise
        except StopSignal as stopped:
            stop(process, grace_s=SHUTDOWN_GRACE_S)
            raise typer.Exit(stopped.exit_code) from None
        except BaseException:
            stop(process, grace_s=0)
            raise
    if code:
        raise typer.Exit(code)


def stop(process: subprocess.Popen | None, grace_s: float, poll_s: float = 0.1) -> None:
    """SIGTERM the server's process group (`mlflow ui` runs uvicorn as its child), give the whole
    group `grace_s` to shut down, then SIGKILL what is left of it. The group outlives its leader
    when a child lingers: it is done once no member is left, not once the leader exited."""
    if process is None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    try:  # a second Ctrl-C or signal while it shuts down: SIGKILL at once
        while _group_alive(process) and time.monotonic() < deadline:
            time.sleep(poll_s)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def _group_alive(process: subprocess.Popen) -> bool:
    """Whether a member of the server's process group still runs (the leader reaped if it exited)."""
    process.poll()
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    return True
