"""Where a study's executions live and the JSON records in them, read and written without Ray
(`study show` reads a comparison's record through this module; the check that every node of a
cluster sees the storage is `tune.storage`'s, which re-exports these names).

A local `study run` resolves a relative `storage` against the working directory, as it always did.
A submitted study's driver, however, runs inside the job's working_dir: Ray's unpacked copy of the
project under its temp dir (`runtime_resources/working_dir_files/_ray_pkg_*`), deleted when Ray
garbage-collects the package or the cluster restarts. So in a submitted job (`submit` sets
VITSCALE_SUBMITTED_JOB) a relative `storage` — the default `./ray_results` included — resolves
against a persistent base instead: `$VITSCALE_STORAGE_ROOT` where the cluster's nodes were started
with it (point it at the cluster's shared storage), else `~/vitscale` on the head node.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from vitscale.errors import UserError, make_folder

STATE_FILE = "vitscale-study.json"  # in an execution folder: spec, MLflow parent run, tracking URI
LATEST_FILE = "latest"  # in storage/<name>/: the newest execution folder
JOB_ENV = "VITSCALE_SUBMITTED_JOB"  # "1" in the environment of a submitted study's driver
ROOT_ENV = "VITSCALE_STORAGE_ROOT"  # the cluster's persistent (shared) base for relative storage
JOB_DEFAULT_BASE = "~/vitscale"


def read_state(path: Path, default: dict | None = None) -> dict:
    """An execution's JSON record (`vitscale-study.json`, `comparison.json`); `default` when absent.
    A damaged one (edited, truncated by a full disk) is one line naming it, not a traceback."""
    if default is not None and not path.is_file():
        return default
    try:
        state = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(
            f"{path}: cannot read this execution's record ({exc}); restore it, or start a new "
            "execution with `vitscale study run`"
        ) from None
    if not isinstance(state, dict):
        raise UserError(
            f"{path}: not an execution record (a JSON object); restore it or start a new execution"
        )
    return state


def write_state(path: Path, state: dict) -> None:
    """Write an execution's JSON record atomically: a kill never leaves half a file to resume from."""
    write_atomically(path, json.dumps(state, indent=2, default=str))


def write_atomically(path: Path, text: str) -> None:
    """`path` holds `text`, or (a kill, a full disk) still its last good content: written to a
    temporary name, fsync'ed and renamed; a failed write leaves no temporary file behind."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        with tmp.open("w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def new_execution_folder(study_folder: Path, stamp: str) -> Path:
    """The folder of a new execution, `study_folder/stamp` (an `x` more per one already there),
    claimed with an atomic mkdir: two drivers started within one second each get their own."""
    make_folder(study_folder, "storage")
    name = stamp
    while True:
        try:
            make_folder(study_folder / name, "storage", new=True)
            return study_folder / name
        except FileExistsError:
            name += "x"


def absolute_sqlite(uri: str) -> str:
    """`sqlite:///mlflow.db` names a file relative to the working directory; an execution record
    keeps `sqlite:////abs/mlflow.db`, the same file from any directory (resume by folder)."""
    prefix = "sqlite:///"
    path, sep, query = uri.removeprefix(prefix).partition("?")
    if not uri.startswith(prefix) or not path or path.startswith("/") or path == ":memory:":
        return uri
    return f"{prefix}{Path(path).resolve()}{sep}{query}"


def in_submitted_job() -> bool:
    return os.environ.get(JOB_ENV) == "1"


def base() -> Path:
    """What a relative `storage` is relative to (see the module docstring)."""
    if in_submitted_job():
        return Path(os.environ.get(ROOT_ENV) or JOB_DEFAULT_BASE).expanduser().resolve()
    return Path.cwd()


def resolve(storage: str) -> Path:
    """A study's `storage` (or --storage) -> the absolute folder holding `<study>/<execution>`."""
    text = str(storage)
    if "://" in text and not text.startswith("file://"):
        raise UserError(
            f"storage: {text!r}: only local or shared-filesystem paths are supported by this version; "
            "mount the bucket (e.g. s3fs/gcsfuse) and pass its path"
        )
    path = Path(text.removeprefix("file://")).expanduser()
    root = (path if path.is_absolute() else base() / path).resolve()
    if in_submitted_job() and root.is_relative_to(Path.cwd().resolve()):
        raise UserError(
            f"storage: {root} is inside the job's working_dir, which Ray deletes; "
            f"give an absolute path outside it, or set {ROOT_ENV} on the cluster"
        )
    return root
