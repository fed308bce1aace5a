"""`study submit`, `study resume --address http://...`, `study logs`: studies as Ray jobs.

The project directory travels as the job's `working_dir` (data, results, stores and the venv are
left out), with PYTHONPATH pointing at its platform/ so the submitted code is what runs even where
an older vitscale is installed. The job's driver runs `vitscale study run|resume ... --address auto`
on the head node, so tracking must be a server the cluster can reach (checked before submitting).
The driver's environment carries VITSCALE_SUBMITTED_JOB=1: its storage then resolves on the
cluster's persistent storage, never in the working_dir (see `tune.storage`). The job's metadata
names the study and its planned trials for `study status` (see `tune.jobs`).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path

from vitscale.errors import UserError
from vitscale.study import count_trials
from vitscale.tracking.layout import TRACKING_URI_ENV
from vitscale.tracking.provenance import capture
from vitscale.tune.storage import JOB_ENV

# gitignore syntax, anchored at the project root: a bare "data" would also drop platform/vitscale/data.
EXCLUDES = [
    "/.git/",
    "/.venv/",
    "__pycache__/",
    "*.egg-info/",
    "/mlflow.db",
    "*.db",
    "/mlruns/",
    "/mlartifacts/",
    "/ray_results/",
    "/reports/",
    "/data/",
    "/checkpoints/",
    ".pytest_cache/",
    ".ruff_cache/",
]
STATE_DIR = Path.home() / ".vitscale"
LAST_ADDRESS_FILE = STATE_DIR / "last_job_address"
LAST_TRACKING_FILE = STATE_DIR / "last_job_tracking_uri"


def project_root(start: Path) -> Path:
    """The nearest folder above `start` holding pyproject.toml (the code to ship); else this checkout."""
    here = Path(__file__).resolve().parents[3]  # platform/vitscale/tune/submit.py -> the checkout
    for folder in [start, *start.parents, here]:
        if (folder / "pyproject.toml").is_file() and (folder / "platform" / "vitscale").is_dir():
            return folder
    raise UserError(
        f"{start}: no vitscale project (pyproject.toml with platform/vitscale) above it; "
        "run `study submit` inside a vitscale checkout"
    )


def is_job_server(address: str | None) -> bool:
    """http(s)://HEAD:8265 is a job server (submit a job); anything else is a cluster to join."""
    return bool(address) and address.startswith(("http://", "https://"))


def job_client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    address = address or os.environ.get("RAY_API_SERVER_ADDRESS") or _last(LAST_ADDRESS_FILE)
    if not address:
        raise UserError("--address: give the job server, e.g. --address http://HEAD:8265")
    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(
            f"--address: cannot reach the Ray job server at {address} ({str(exc).splitlines()[0]}); "
            "is the cluster up and its dashboard port (8265) reachable?"
        ) from None


def submit(study_file: Path, address: str, tracking_uri: str, overrides: list[str], spec) -> str:
    """Submit `study run` as a Ray job; return the job id. `spec`: the study as loaded here."""
    study_file = study_file.resolve()
    root = project_root(study_file.parent)
    relative = study_file.relative_to(root)
    command = ["vitscale", "study", "run", str(relative), "--address", "auto", "--tracking-uri", tracking_uri]
    for item in overrides:
        command += ["--set", item]
    metadata = {
        "vitscale_study": spec.name,
        "vitscale_command": "run",
        "vitscale_file": str(relative),
        "vitscale_trials": str(count_trials(spec)),
        "vitscale_tracking_uri": tracking_uri,
        "vitscale_experiment": spec.tracking.experiment or spec.name,
    }
    # The job's working_dir has no .git: the commit, dirty flag and diff travel in its environment.
    env = {TRACKING_URI_ENV: tracking_uri, **capture(str(relative), cwd=root).to_env()}
    job_id = _submit(root, address, command, metadata, env)
    _remember(LAST_TRACKING_FILE, tracking_uri)
    return job_id


def submit_resume(target: str, address: str, storage: str | None, allow_autoscale: bool) -> str:
    """Submit `study resume TARGET` as a Ray job: it continues the newest execution of the study
    in the cluster's storage, exactly as a local resume would; return the job id."""
    command = ["vitscale", "study", "resume", target, "--address", "auto"]
    command += ["--storage", storage] if storage else []
    command += ["--allow-autoscale"] if allow_autoscale else []
    metadata = {"vitscale_study": Path(target).stem if target.endswith((".yaml", ".yml")) else target}
    metadata["vitscale_command"] = "resume"
    tracking_uri = os.environ.get(TRACKING_URI_ENV) or _last(LAST_TRACKING_FILE)
    if tracking_uri:  # only where `study status` reads progress; the resume uses the execution's own
        metadata["vitscale_tracking_uri"] = tracking_uri
    root = project_root(Path.cwd())
    # The resumed trials run this checkout's code: its commit, dirty flag and diff travel as in submit.
    return _submit(
        root, address, command, metadata, capture(f"vitscale study resume {target}", cwd=root).to_env()
    )


def _submit(root: Path, address: str, command: list[str], metadata: dict, env: dict) -> str:
    client = job_client(address)
    runtime_env = {
        "working_dir": str(root),
        "excludes": EXCLUDES,
        "env_vars": {"PYTHONPATH": "platform", JOB_ENV: "1", **env},
    }
    job_id = client.submit_job(entrypoint=shlex.join(command), runtime_env=runtime_env, metadata=metadata)
    _remember(LAST_ADDRESS_FILE, address)
    return job_id


def logs(address: str | None, job_id: str, follow: bool) -> None:
    client = job_client(address)
    if not follow:
        print(client.get_job_logs(job_id), end="")
        return

    async def _tail() -> None:
        async for lines in client.tail_job_logs(job_id):
            print(lines, end="", flush=True)

    asyncio.run(_tail())


def last_tracking_uri() -> str | None:
    """The tracking URI of the last `study submit` from this machine (for `study status`)."""
    return _last(LAST_TRACKING_FILE)


def _remember(path: Path, value: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value))
    except OSError:
        pass


def _last(path: Path) -> str | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None
