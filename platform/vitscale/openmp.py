"""How the processes that compute wait for their threads: OpenMP's passive wait policy, set before
OpenMP starts.

torch's CPU kernels run on an OpenMP runtime (libgomp in the pip wheels). With `OMP_WAIT_POLICY`
unset, a thread that finished its part of a parallel region spins on its core for a while before
it sleeps; on cores shared with another trial, a benchmark worker or anything else, the spinning
threads take the time the working ones need. Measured on 2 cores under load (issue 30): attention
on digits at 32 px with 2 threads took 1,472 ms per training step, 140 ms with 1 thread and 116 ms
with 2 threads and `OMP_WAIT_POLICY=PASSIVE`; a benchmark forward used 1.4-2.3x less CPU time.

The runtime reads the variable once, when it loads (with `import torch`), so it has to be in a
process's environment before that. vitscale puts `PASSIVE` there, unless the user chose a policy
(their value wins), for every process it starts to compute:

- Ray trial workers: `tune.cluster.connect` (in-process Ray's workers inherit the driver's
  environment; a cluster's get it as runtime_env `env_vars`);
- benchmark workers: `bench.isolate`, in the subprocess's environment, with `OMP_NUM_THREADS`;
- the `vitscale` command itself (`vitscale train`, `vitscale bench` in process, ...): `cli.main`,
  first thing, before any command imports torch. A Python process that loaded OpenMP before
  (torch imported in a notebook, then `fit`) keeps the policy it started with: re-executing
  the process to change it is not worth what it breaks (stdin, debuggers, the caller's state).

Threads are the other half: a trial runs `train.threads` threads, its CPUs (`resources.cpu`) unless
set (`study.resolve.run_trial`); `tune.cpu_share` refuses a study whose trials' threads would
share cores.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping

WAIT_POLICY = "OMP_WAIT_POLICY"
NUM_THREADS = "OMP_NUM_THREADS"
PASSIVE = "PASSIVE"
_RUNTIMES = ("libgomp", "libiomp", "libomp")  # GNU, Intel and LLVM OpenMP runtimes


def wait_policy(environ: Mapping[str, str] | None = None) -> str:
    """The policy a worker gets: the user's `OMP_WAIT_POLICY` where set, else PASSIVE."""
    environ = os.environ if environ is None else environ
    return environ.get(WAIT_POLICY) or PASSIVE


def worker_env(threads: int | None = None, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The OpenMP variables a worker process starts with: the wait policy, and `OMP_NUM_THREADS`
    when a thread count is given (the runtime sizes its pool from it before torch is told)."""
    env = {WAIT_POLICY: wait_policy(environ)}
    if threads:
        env[NUM_THREADS] = str(threads)
    return env


def runtime_loaded() -> bool:
    """Whether an OpenMP runtime is loaded in this process already (Linux: its memory map; elsewhere:
    whether torch was imported)."""
    try:
        with open("/proc/self/maps") as maps:
            return any(name in line for line in maps for name in _RUNTIMES)
    except OSError:
        return "torch" in sys.modules


def wait_passively_here() -> bool:
    """Put PASSIVE in this process's environment unless a policy is set or OpenMP already runs
    (then the variable would claim what the runtime never read). True when it set it."""
    if WAIT_POLICY in os.environ or runtime_loaded():
        return False
    os.environ[WAIT_POLICY] = PASSIVE
    return True


def describe(threads: int) -> str:
    """`1 thread, OMP_WAIT_POLICY=PASSIVE`: what a trial's log and `vitscale train` print."""
    policy = os.environ.get(WAIT_POLICY)
    wait = (
        f"{WAIT_POLICY}={policy}" if policy else f"{WAIT_POLICY} unset (OpenMP's default: spin, then sleep)"
    )
    return f"{threads} thread{'' if threads == 1 else 's'}, {wait}"
