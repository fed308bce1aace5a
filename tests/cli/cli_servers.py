"""Run a `vitscale` command that serves a web page, as a user in a terminal would: wait for the
line that announces its URL, check the page answers then, Ctrl-C it, return its stderr."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from vitscale.cli.local_server import answers_http


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def serve_then_interrupt(args: list[str], cwd: Path, ready_prefix: str, url: str) -> tuple[str, str]:
    """(the ready line, stderr) of `vitscale *args`, Ctrl-C'd once the ready line is printed; the
    page at `url` must answer when the line appears."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "vitscale", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # Ctrl-C below reaches its whole group, as in a terminal
        # as a terminal starts it: an xdist worker ignores SIGINT, and an ignored signal is inherited
        preexec_fn=_default_sigint,
    )
    ready = ""
    try:
        for line in proc.stdout:
            if line.startswith(ready_prefix):
                ready = line
                assert answers_http(url), line  # printed after it answers
                break
        else:
            pytest.fail(f"no {ready_prefix!r} line; stderr: {proc.stderr.read()[-2000:]}")
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    return ready, err
