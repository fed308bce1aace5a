"""`study submit`, `study resume --address http://...`, `study logs`: studies as Ray jobs.

What travels as the job's `working_dir` is what git tracks in the project (as it is in the working
tree, uncommitted edits included), the study file, and the paths the user names with `--include`;
never an untracked file (a `.env`, keys, `wandb/`, model files, data), whatever .gitignore says. Ray
keeps the upload on the cluster's disk, readable there, so the set is explicit. PYTHONPATH points at
its platform/ so the submitted code is what runs even where an older vitscale is installed. The
commit and dirty flag travel in the job's environment; the uncommitted diff travels as a file in the
upload (`tracking.provenance.DIFF_FILE`), never in the environment, which the job API shows to anyone
who can list jobs. The job's driver runs `vitscale study run|resume ... --address auto`
on the head node, so tracking must be a server the cluster can reach (checked before submitting).
The driver's environment carries VITSCALE_SUBMITTED_JOB=1: its storage then resolves on the
cluster's persistent storage, never in the working_dir (see `tune.storage`). The job's metadata
names the study and its planned trials for `study status` (see `tune.jobs`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from vitscale.errors import UserError
from vitscale.study import count_trials
from vitscale.tracking.layout import TRACKING_URI_ENV
from vitscale.tracking.provenance import DIFF_FILE, Provenance, capture
from vitscale.tune.storage import JOB_ENV

# Ray logs four INFO lines while it packs and uploads a job's working_dir ("Creating a file package",
# "Pushing file package", "Successfully pushed", "Uploading package"): nothing to act on, printed
# before the job id. Warnings and errors still show.
UPLOAD_LOGGERS = ("ray._private.runtime_env.packaging", "ray.dashboard.modules.dashboard_sdk")
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


def tracked_files(root: Path) -> list[str]:
    """The files git tracks under `root` (submodules included) that exist in the working tree."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--recurse-submodules"],
            cwd=root, capture_output=True, timeout=60, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        raise UserError(
            f"{root}: not a git checkout; `study submit` uploads the files git tracks, so run it "
            "in a git clone of the project (and name anything else with --include PATH)"
        ) from None
    names = [name for name in out.decode().split("\0") if name]
    return [name for name in names if (root / name).is_file()]


def _included(root: Path, path: str) -> Path:
    """`--include PATH`: a file or folder inside the project, relative to it (or absolute)."""
    full = (root / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
    if not full.is_relative_to(root.resolve()):
        raise UserError(f"--include {path}: not inside the project {root}; copy it there first")
    if not full.exists():
        raise UserError(f"--include {path}: no such file or folder in {root}")
    return full


def _copy_inside(source: Path, target: Path, root: Path) -> None:
    """Copy one file, or a folder's files, from the project into the upload. A symlink is copied as
    its content only when it points inside the project (Ray would follow it out otherwise)."""
    files = [source] if source.is_file() else sorted(p for p in source.rglob("*") if p.is_file())
    for path in files:
        if "__pycache__" in path.parts or not path.resolve().is_relative_to(root.resolve()):
            continue
        destination = target / path.relative_to(root)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, destination)


@contextmanager
def upload(
    root: Path, provenance: Provenance, includes: list[str] = (), extra: list[Path] = ()
) -> Iterator[dict]:
    """The job's runtime_env, its working_dir a staging copy of what may travel: the files git
    tracks, `extra` (the study file, even untracked) and `includes`, plus the diff as DIFF_FILE.
    The copy is deleted once the block ends (Ray has uploaded it by then)."""
    root = root.resolve()
    staging = Path(tempfile.mkdtemp(prefix="vitscale-upload-"))
    try:
        for name in tracked_files(root):
            _copy_inside(root / name, staging, root)
        for path in [*extra, *(_included(root, item) for item in includes)]:
            _copy_inside(path.resolve(), staging, root)
        if provenance.diff.strip():
            (staging / DIFF_FILE).write_text(provenance.diff)
        env = {"PYTHONPATH": "platform", JOB_ENV: "1", **provenance.to_env()}
        yield {"working_dir": str(staging), "env_vars": env}
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def submit(
    study_file: Path, address: str, tracking_uri: str, overrides: list[str], spec, includes: list[str] = ()
) -> str:
    """Submit `study run` as a Ray job; return the job id. `spec`: the study as loaded here;
    `includes`: untracked paths to upload too (--include)."""
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
    # The job's working_dir has no .git: the commit and dirty flag travel in its environment, the
    # diff as a file in the upload.
    provenance = capture(str(relative), cwd=root)
    env = {TRACKING_URI_ENV: tracking_uri}
    job_id = _submit(root, address, command, metadata, provenance, env, includes, extra=[study_file])
    _remember(LAST_TRACKING_FILE, tracking_uri)
    return job_id


def submit_resume(
    target: str, address: str, storage: str | None, allow_autoscale: bool, includes: list[str] = ()
) -> str:
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
    provenance = capture(f"vitscale study resume {target}", cwd=root)
    return _submit(root, address, command, metadata, provenance, {}, includes)


def _submit(
    root: Path,
    address: str,
    command: list[str],
    metadata: dict,
    provenance: Provenance,
    env: dict,
    includes: list[str],
    extra: list[Path] = (),
) -> str:
    client = job_client(address)
    with upload(root, provenance, includes, extra) as runtime_env, quiet_upload_logs():
        runtime_env["env_vars"].update(env)
        job_id = client.submit_job(entrypoint=shlex.join(command), runtime_env=runtime_env, metadata=metadata)
    _remember(LAST_ADDRESS_FILE, address)
    return job_id


@contextmanager
def quiet_upload_logs() -> Iterator[None]:
    """Within: UPLOAD_LOGGERS at WARNING (their levels restored after)."""
    loggers = [logging.getLogger(name) for name in UPLOAD_LOGGERS]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)


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
