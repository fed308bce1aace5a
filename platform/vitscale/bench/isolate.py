"""Run one configuration in its own subprocess (`python -m vitscale.bench.worker`).

Why a subprocess and not multiprocessing: it needs no picklable __main__ (it works the same
from the CLI, pytest and a Ray worker), and the child's peak RSS is the configuration's own (above
the child's own idle peak, read before it builds the model: see `measure.measure_configuration`).
A child the kernel kills with SIGKILL has, on a machine without other limits, almost always
met the OOM killer: that is recorded as `out_of_memory`; any other death as `error` with the last
line the child wrote on stderr. The sweep goes on either way. The child starts with
`OMP_WAIT_POLICY=PASSIVE` (unless the user set a policy) and `OMP_NUM_THREADS` = the config's
threads: spinning OpenMP threads on shared cores time each other (`vitscale.openmp`).
A cell's timing worker (`run_isolated_cell`) starts with `allocator`'s setting (large buffers kept,
not re-faulted); a worker whose peak RSS is read (`run_isolated`) with glibc's defaults.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

from vitscale import openmp
from vitscale.bench.allocator import allocator_env
from vitscale.bench.records import blank_record
from vitscale.bench.worker import RECORD_PREFIX
from vitscale.errors import OUT_OF_MEMORY

WORKER = [sys.executable, "-m", "vitscale.bench.worker"]


def _call(
    request: dict[str, Any], threads: int | None, timeout: float | None, timing_only: bool = False
) -> tuple[dict | None, str]:
    """(parsed reply or None, a one-line reason when there is none). `timing_only`: a worker whose
    peak memory nobody reads, started with large buffers kept between calls (`allocator`)."""
    # Passive OpenMP waiting unless the user chose a policy, and the pool sized before
    # torch.set_num_threads runs (vitscale.openmp): read once, when the worker imports torch.
    env = {**os.environ, **openmp.worker_env(threads)}
    if timing_only:
        env.update(allocator_env(env))
    try:
        proc = subprocess.run(
            WORKER, input=json.dumps(request), capture_output=True, text=True, timeout=timeout, env=env
        )
    except subprocess.TimeoutExpired:
        return None, f"error: TimeoutExpired: the worker ran past {timeout:g} s"
    reply = next(
        (
            json.loads(ln[len(RECORD_PREFIX) :])
            for ln in reversed(proc.stdout.splitlines())
            if ln.startswith(RECORD_PREFIX)
        ),
        None,
    )
    if reply is None:
        return None, _death(proc)
    if proc.returncode:  # it died after handing back (part of) its work
        death = _death(proc)
        reply["error"] = f"{reply.get('error') or 'worker died'} ({death})"
        if reply.get("status") != "ok":  # what it had still to do, it did not: its death is the status
            reply["status"] = death.partition(": ")[0]
    return reply, ""


def _death(proc: subprocess.CompletedProcess) -> str:
    """'out_of_memory: worker killed by SIGKILL (...)' / 'error: ...': why a worker ended badly."""
    if proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        if -proc.returncode == signal.SIGKILL:
            return f"{OUT_OF_MEMORY}: worker killed by {sig} (most likely the kernel's OOM killer)"
        return f"error: worker killed by {sig}"
    tail = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()]
    return f"error: worker exited with {proc.returncode}: {tail[-1] if tail else 'no output'}"


def run_isolated(
    config,
    point: Mapping[str, Any],
    device: str = "cpu",
    timeout: float | None = None,
    timed: bool = True,
) -> dict[str, Any]:
    """The record of one configuration, measured in a fresh worker process: its memory, and
    unless `timed` is off (its timing then comes from `run_isolated_cell`) its timing."""
    request = {
        "config": config.model_dump(mode="json"),
        "point": dict(point),
        "device": device,
        "timed": timed,
    }
    reply, reason = _call(request, config.threads, timeout)
    if reply is not None:
        return reply
    return failed_record(config, point, device, reason)


def failed_record(config, point: Mapping[str, Any], device: str, reason: str) -> dict[str, Any]:
    """The point's blank record with the status and message of `reason` ('out_of_memory: ...')."""
    record = blank_record(config, point, device)
    status, _, message = reason.partition(": ")
    record.update(status=status, error=message)
    return record


def run_isolated_cell(
    config, points: list[Mapping[str, Any]], device: str = "cpu", timeout: float | None = None
) -> tuple[list[dict[str, Any]] | None, str]:
    """Round-robin timing of `points` in one fresh worker: (records, "") or (None, reason)."""
    request = {"config": config.model_dump(mode="json"), "cell": [dict(p) for p in points], "device": device}
    return _call(request, config.threads, timeout, timing_only=True)
