"""Connecting to Ray and checking, before anything starts, that a trial can be placed at all.

Ray leaves a trial whose resources no node has PENDING forever; the preflight turns that into
one line at once. Autoscaling clusters grow nodes on demand, so `--allow-autoscale` skips it.

Loopback by default: Ray on Linux swaps a loopback node address for the host's routable IP, and its
servers (GCS, raylets, agents, every worker's gRPC port) then listen on all interfaces, reachable
by anyone on the network. Ray keeps 127.0.0.1, and binds every server there, where its single-
machine switch `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` is set (the default on Windows and macOS).
`connect` sets it for in-process Ray and for a cluster at 127.0.0.1/localhost (infra/local/ray-up.sh
starts its nodes with it too); a value the user exported wins. A cluster at a routable address is
Ray's default: nodes and clients there use that address.

Trial workers start with `OMP_WAIT_POLICY=PASSIVE` (`vitscale.openmp`; a policy the user exported
wins): in-process Ray's workers inherit the driver's environment, a cluster's workers get it as the
job's runtime_env `env_vars` (merged by Ray with a submitted job's own). Their thread count is the
trial's: Ray sets `OMP_NUM_THREADS` to the CPUs it assigned (Ray 2.60: floor, at least 1, where
unset) and the trial calls `torch.set_num_threads(train.threads)`.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from pathlib import Path

from vitscale import openmp
from vitscale.errors import UserError
from vitscale.tracking.tune_loggers import AUTO_LOGGERS_OFF

# Ray's own switch (read by Ray at import, and by every process it starts from their environment).
LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")
STARTUP_TIMEOUT = "The current node timed out during startup"  # Ray's own words; its wait is 30 s, fixed
_set_here = False  # whether LOOPBACK_ENV in os.environ is this module's doing (not the user's)

# The driver process's environment for Ray, set when it connects (its entry into Ray): Ray and Tune
# read these from the environment only. How often Tune snapshots the experiment is
# `tune.snapshot_period`'s (set per study; 2 s for PBT/PB2): a fixed 2 s here read as the user's
# choice and overrode it, and every study of many trials paid a whole-experiment rewrite every 2 s
# (the driver's CPU per trial grew with the trials: docs/performance.md). Tune does not warn about
# what a snapshot costs.
DRIVER_ENV = {
    "RAY_DEDUP_LOGS": "1",
    "RAY_AIR_NEW_OUTPUT": "0",
    "TUNE_WARN_EXCESSIVE_EXPERIMENT_CHECKPOINT_SYNC_THRESHOLD_S": "0",
    # Tune's automatic JSON/CSV/TensorBoard loggers ran in the driver on every reported epoch while
    # the trial waited (8.9 ms a result on the quickstart); the tuner adds the ones a study uses
    # (tracking.tune_loggers).
    **AUTO_LOGGERS_OFF,
    # A new raylet prestarts one worker per CPU for the first driver; Tune never uses them (its
    # trial actors carry a runtime env, so they get workers of their own), and on 2 cores their
    # imports (~1.5 s of CPU each) delay the study's own start (issue 30).
    "RAY_prestart_worker_first_driver": "0",
    # Ray's memory monitor kills a worker when the node's memory runs low, and the error that kills a
    # trial actor's task (OutOfMemoryError) is neither an actor nor a task error to Tune 2.60, which
    # then ends the whole study ("Caught unexpected exception": a smoke benchmark study died so,
    # beside another sweep, at 22 of 23.5 GB). Off, the kernel's OOM killer ends the biggest process,
    # the trial's: its SIGKILL is a trial failure (`out_of_memory`), and the study goes on.
    "RAY_memory_monitor_refresh_ms": "0",
}


def _not_the_token_default_notice(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Token authentication is enabled for this Ray cluster")


def _quiet_token_default_notice() -> None:
    """A new local cluster gets Ray's default token authentication, and Ray announces that on every
    study run. Drop that notice only; the warning that authentication is *disabled* still shows.
    (Setting RAY_AUTH_MODE ourselves is no substitute: Ray caches its config at import.)"""
    setup_logger = logging.getLogger("ray._private.authentication.authentication_token_setup")
    if _not_the_token_default_notice not in setup_logger.filters:
        setup_logger.addFilter(_not_the_token_default_notice)


def _unreachable(address: str, reason: object) -> UserError:
    return UserError(
        f"--address: cannot connect to the Ray cluster at {address!r} ({reason}); start one "
        "(infra/local/ray-up.sh, `ray up infra/ray/aws-gpu.yaml`) or drop --address to run locally"
    )


def _check_reachable(address: str, timeout_s: float = 10.0) -> None:
    """One TCP connect to HOST:PORT first: `ray.init` keeps retrying an address where nothing
    listens for minutes, which looks like a hang."""
    host, _, port = address.split("://", 1)[-1].rpartition(":")
    if not host or not (port.isascii() and port.isdigit()):
        return  # "auto" and the like: Ray resolves them itself
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except (OSError, ValueError) as exc:
        raise _unreachable(address, getattr(exc, "strerror", None) or exc) from None


def is_loopback(address: str | None) -> bool:
    """In-process Ray (no address), or a cluster whose address names this machine's loopback."""
    if address == "auto":
        address = os.environ.get("RAY_ADDRESS")  # what Ray resolves "auto" to first
    if not address:
        return True
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in LOOPBACK_HOSTS


def bind_loopback(on: bool) -> None:
    """Keep (or stop keeping) Ray on 127.0.0.1 in this process and in the Ray processes it starts.
    Ray reads the switch at import, so its constant is set too; a value the user exported wins."""
    global _set_here
    if on and LOOPBACK_ENV not in os.environ:
        os.environ[LOOPBACK_ENV], _set_here = "0", True
    elif not on and _set_here:
        os.environ.pop(LOOPBACK_ENV, None)
        _set_here = False
    from ray._common.utils import env_bool
    from ray._private import ray_constants

    ray_constants.ENABLE_RAY_CLUSTER = env_bool(LOOPBACK_ENV, not ray_constants.IS_WINDOWS_OR_OSX)


def connect(address: str | None = None, num_cpus: int | None = None, num_gpus: int | None = None) -> None:
    """`ray.init` for this driver: in-process local Ray by default, a cluster with `address`.
    In-process Ray and a cluster at 127.0.0.1 stay on loopback (see the module docstring). Once
    connected it prints, once, the Ray dashboard's URL where Ray serves one, and where in-process
    Ray keeps its logs."""
    import ray

    for key, value in DRIVER_ENV.items():  # a variable the user set wins
        os.environ.setdefault(key, value)
    if ray.is_initialized():
        return
    bind_loopback(is_loopback(address))
    started = time.monotonic()
    # Workers' stdout/stderr stay out of the terminal (log_to_driver): a trial's go to its own log
    # (Tune's log_to_file; logged to its MLflow run), the rest to Ray's session logs, where they
    # belong: Tune's "Restored on ... from checkpoint" INFO lines, which arrived after a resume's
    # summary, and the SystemExit traceback of a worker Ray stops at the end of a study. Ray's own
    # errors (a worker or node died) still reach the driver: they are not worker output.
    kwargs = dict(logging_level=logging.WARNING, log_to_driver=False, configure_logging=True)
    if address:  # workers of a cluster start from their node's environment: tell them
        kwargs["runtime_env"] = {"env_vars": openmp.worker_env()}
    else:  # in-process Ray's raylet and workers start from this environment
        os.environ.update(openmp.worker_env())
    try:
        if address:
            _check_reachable(address)
            context = ray.init(address=address, **kwargs)
        else:
            _quiet_token_default_notice()
            # "local": a new in-process cluster. Without an address Ray joins the cluster the last
            # `ray start` on this machine recorded (/tmp/ray/ray_current_cluster) or $RAY_ADDRESS's:
            # a laptop study would run on whatever cluster was left up (or fail on num_cpus).
            # No dashboard: it adds a process and seconds to Ray's start (20 -> 25 s on a busy
            # 2-core machine), and the progress lines and `vitscale ui` show a study.
            context = _start_local(num_cpus, num_gpus, kwargs)
    except ConnectionError as exc:
        raise _unreachable(address, exc) from None
    for line in ready_lines(context, address, time.monotonic() - started):
        print(line, flush=True)


def _start_local(num_cpus: int | None, num_gpus: int | None, kwargs: dict, attempts: int = 2):
    """In-process Ray, started again once when its raylet misses Ray's fixed 30 s registration wait
    (a machine at load 70 did; the second start succeeded), else one line instead of a traceback."""
    import ray

    for attempt in range(1, attempts + 1):
        try:
            return ray.init("local", num_cpus=num_cpus, num_gpus=num_gpus, include_dashboard=False, **kwargs)
        except Exception as exc:  # Ray raises a bare Exception for this
            if not str(exc).startswith(STARTUP_TIMEOUT):
                raise
            ray.shutdown()
            if attempt == attempts:
                load = ", ".join(f"{v:.0f}" for v in os.getloadavg())
                raise UserError(
                    f"in-process Ray did not start: its node missed Ray's 30 s startup wait {attempts} "
                    f"times (load average {load}); retry when the machine is less busy"
                ) from None
            print("in-process Ray's node timed out during startup; starting it again ...", flush=True)


def ready_lines(context, address: str | None, seconds: float) -> list[str]:
    """What the driver says once Ray is up: how long that took, the dashboard's URL where Ray serves
    one (`context.dashboard_url`, without a scheme), and, for in-process Ray, where its own logs are
    (workers' output included: it no longer reaches the terminal)."""
    info = getattr(context, "address_info", None) or {}
    where = f"Ray cluster at {info.get('gcs_address') or address}" if address else "in-process Ray"
    lines = [f"{where} ready in {seconds:.0f} s"]
    url = getattr(context, "dashboard_url", None)
    if url:
        lines.append(f"Ray dashboard: {url if '://' in url else 'http://' + url}")
    session = info.get("session_dir")
    if not address and session:
        lines[0] += f"; its logs: {Path(session) / 'logs'}"
    return lines


def node_capacities() -> list[dict[str, float]]:
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def preflight(cpu: float, gpu: float, allow_autoscale: bool = False) -> None:
    """Fail in one line when no alive node can ever hold one trial's `cpu` and `gpu`."""
    if allow_autoscale:
        return
    nodes = node_capacities()
    if any(n.get("CPU", 0) >= cpu and n.get("GPU", 0) >= gpu for n in nodes):
        return
    have = ", ".join(f"{n.get('CPU', 0):g} CPU/{n.get('GPU', 0):g} GPU" for n in nodes) or "no alive nodes"
    raise UserError(
        f"resources: a trial asks for {cpu:g} CPU and {gpu:g} GPU but no node has that ({have}); "
        "lower `resources` (e.g. --set resources.gpu=0), join a bigger cluster with --address, "
        "or pass --allow-autoscale for an autoscaling cluster"
    )
