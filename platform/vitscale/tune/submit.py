"""`study submit / logs / status`: run a study as a Ray job on a remote cluster's job server.

The project directory travels as the job's `working_dir` (data, results, stores and the venv are
left out), with PYTHONPATH pointing at its platform/ so the submitted code is what runs even where
an older vitscale is installed. The job's driver runs `vitscale study run ... --address auto` on
the head node, so tracking must be a server the cluster can reach (checked before submitting).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
from pathlib import Path

from vitscale.errors import UserError

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
LAST_ADDRESS_FILE = Path.home() / ".vitscale" / "last_job_address"


def project_root(start: Path) -> Path:
    """The nearest folder above `start` holding pyproject.toml (the code to ship)."""
    for folder in [start, *start.parents]:
        if (folder / "pyproject.toml").is_file() and (folder / "platform" / "vitscale").is_dir():
            return folder
    raise UserError(
        f"{start}: no vitscale project (pyproject.toml with platform/vitscale) above it; "
        "run `study submit` inside a vitscale checkout"
    )


def job_client(address: str | None):
    from ray.job_submission import JobSubmissionClient

    address = address or os.environ.get("RAY_API_SERVER_ADDRESS") or _last_address()
    if not address:
        raise UserError("--address: give the job server, e.g. --address http://HEAD:8265")
    try:
        return JobSubmissionClient(address)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UserError(
            f"--address: cannot reach the Ray job server at {address} ({str(exc).splitlines()[0]}); "
            "is the cluster up and its dashboard port (8265) reachable?"
        ) from None


def submit(study_file: Path, address: str, tracking_uri: str, overrides: list[str]) -> str:
    """Submit `study run` as a Ray job; return the job id."""
    study_file = study_file.resolve()
    root = project_root(study_file.parent)
    relative = study_file.relative_to(root)
    command = ["vitscale", "study", "run", str(relative), "--address", "auto", "--tracking-uri", tracking_uri]
    for item in overrides:
        command += ["--set", item]
    client = job_client(address)
    runtime_env = {
        "working_dir": str(root),
        "excludes": EXCLUDES,
        "env_vars": {"PYTHONPATH": "platform", "VITSCALE_TRACKING_URI": tracking_uri},
    }
    job_id = client.submit_job(
        entrypoint=shlex.join(command), runtime_env=runtime_env, metadata={"vitscale_study": str(relative)}
    )
    _remember_address(address)
    return job_id


def status(address: str | None, job_id: str | None) -> list[dict]:
    client = job_client(address)
    jobs = [client.get_job_info(job_id)] if job_id else client.list_jobs()
    rows = []
    for job in jobs:
        rows.append(
            {
                "job_id": job.submission_id or job.job_id,
                "status": str(job.status.value if hasattr(job.status, "value") else job.status),
                "entrypoint": job.entrypoint,
                "message": job.message or "",
            }
        )
    return rows


def logs(address: str | None, job_id: str, follow: bool) -> None:
    client = job_client(address)
    if not follow:
        print(client.get_job_logs(job_id), end="")
        return

    async def _tail() -> None:
        async for lines in client.tail_job_logs(job_id):
            print(lines, end="", flush=True)

    asyncio.run(_tail())


def _remember_address(address: str) -> None:
    try:
        LAST_ADDRESS_FILE.parent.mkdir(parents=True, exist_ok=True)
        LAST_ADDRESS_FILE.write_text(json.dumps(address))
    except OSError:
        pass


def _last_address() -> str | None:
    try:
        return json.loads(LAST_ADDRESS_FILE.read_text())
    except (OSError, ValueError):
        return None
