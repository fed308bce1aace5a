"""Run a `vitscale` command that serves a web page, as a user in a terminal would: wait for the
line that announces its URL, check the page answers then, then Ctrl-C it (return its stderr) or
send the CLI alone a signal, as `kill` or a closed terminal does (return what of it is left)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from vitscale.cli.local_server import answers_http


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], cwd: Path, stderr=subprocess.PIPE) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "vitscale", *args],
        cwd=cwd,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        start_new_session=True,  # Ctrl-C below reaches its whole group, as in a terminal
        # as a terminal starts it: an xdist worker ignores SIGINT, and an ignored signal is inherited
        preexec_fn=_default_sigint,
    )


def _wait_ready(proc: subprocess.Popen, ready_prefix: str, url: str) -> str:
    for line in proc.stdout:
        if line.startswith(ready_prefix):
            assert answers_http(url), line  # printed after it answers
            return line
    stderr = proc.stderr.read() if proc.stderr else ""
    pytest.fail(f"no {ready_prefix!r} line; stderr: {stderr[-2000:]}")


def serve_then_interrupt(args: list[str], cwd: Path, ready_prefix: str, url: str) -> tuple[str, str]:
    """(the ready line, stderr) of `vitscale *args`, Ctrl-C'd once the ready line is printed; the
    page at `url` must answer when the line appears."""
    proc = _start(args, cwd)
    ready = ""
    try:
        ready = _wait_ready(proc, ready_prefix, url)
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    return ready, err


@dataclass
class AfterSignal:
    returncode: int
    stderr: str
    descendants: list[int]  # the CLI's descendants (the server and its workers) when it was signalled
    left: list[str]  # those still running after the CLI exited: their command lines


def serve_then_signal(args: list[str], cwd: Path, ready_prefix: str, url: str, number: int) -> AfterSignal:
    """`vitscale *args` sent signal `number` (the CLI's process alone, as `kill PID` does) once
    its ready line is printed; what it left behind once it exited (then killed, so that a failed
    test leaves no server behind). stderr goes to a file: a server left running would hold a pipe
    open."""
    errors = cwd / f"stderr-{number}.txt"
    with errors.open("w") as sink:
        proc = _start(args, cwd, stderr=sink)
    descendants: list[int] = []
    started: dict[int, str | None] = {}
    try:
        _wait_ready(proc, ready_prefix, url)
        descendants = _descendants(proc.pid)
        started = {pid: _start_time(pid) for pid in descendants}
        os.kill(proc.pid, number)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        proc.stdout.close()
        left = [pid for pid in descendants if _running(pid, started[pid])]
        commands = [_command(pid) for pid in left]
        for pid in left:
            os.kill(pid, signal.SIGKILL)
    return AfterSignal(proc.returncode, errors.read_text(), descendants, commands)


def _stat(pid: int) -> list[str] | None:
    """/proc/PID/stat's fields after the command name (state is [0], ppid [1], starttime [19])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


def _descendants(root: int) -> list[int]:
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [root]
    while frontier:
        children = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += children
        frontier = children
    return found


def _start_time(pid: int) -> str | None:
    fields = _stat(pid)
    return fields[19] if fields else None


def _running(pid: int, start_time: str | None) -> bool:
    """The same process (not a reused pid) still there and not a zombie."""
    fields = _stat(pid)
    return fields is not None and fields[19] == start_time and fields[0] != "Z"


def _command(pid: int) -> str:
    try:
        return f"{pid}: " + Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return f"{pid}: (gone)"


def port_closed(port: int) -> bool:
    """Nothing listens on 127.0.0.1:`port` (a connect is refused)."""
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) != 0
