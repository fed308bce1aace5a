"""Where a study's executions live, and a check that every node of the cluster sees that place.

A local `study run` resolves a relative `storage` against the working directory, as it always did.
A submitted study's driver, however, runs inside the job's working_dir: Ray's unpacked copy of the
project under its temp dir (`runtime_resources/working_dir_files/_ray_pkg_*`), deleted when Ray
garbage-collects the package or the cluster restarts. So in a submitted job (`submit` sets
VITSCALE_SUBMITTED_JOB) a relative `storage` — the default `./ray_results` included — resolves
against a persistent base instead: `$VITSCALE_STORAGE_ROOT` where the cluster's nodes were started
with it (point it at the cluster's shared storage), else `~/vitscale` on the head node.

Tune writes a trial's checkpoints on the node the trial runs on and restores them wherever the
trial restarts, and the driver reads them back on resume; on a cluster of several nodes the storage
must therefore be one filesystem that every node mounts. `check_shared` proves that, at the moment
it runs, each alive node opens the same file at that path: the driver writes a marker holding a
random token, then one zero-CPU task pinned to each alive node reads it back and also reports that
node's Ray temp dir. A node that cannot read the token has another filesystem (or nothing) there;
a path inside any node's Ray temp dir is scratch that Ray wipes, refused too. Nodes that join later
are not checked. Nodes that share one machine (infra/local) share its filesystem, so there only the
temp-dir rule can refuse a path.
"""

from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vitscale.errors import UserError, make_folder

STATE_FILE = "vitscale-study.json"  # in an execution folder: spec, MLflow parent run, tracking URI
LATEST_FILE = "latest"  # in storage/<name>/: the newest execution folder
JOB_ENV = "VITSCALE_SUBMITTED_JOB"  # "1" in the environment of a submitted study's driver
ROOT_ENV = "VITSCALE_STORAGE_ROOT"  # the cluster's persistent (shared) base for relative storage
JOB_DEFAULT_BASE = "~/vitscale"
FIX = "put it on storage every node mounts: --set storage=/shared/path"
PROBE_TIMEOUT_S = 120.0


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


@dataclass(frozen=True)
class NodeReply:
    """What the probe on one node found."""

    node_id: str
    address: str
    temp_dir: str
    sees_marker: bool


@ray.remote(num_cpus=0, max_retries=0)
def _probe(marker: str, token: str) -> tuple[str, str, bool]:
    """On one node: its Ray temp dir and IP, and whether the driver's marker is there, unchanged."""
    try:
        seen = Path(marker).read_text() == token
    except OSError:
        seen = False
    node = ray._private.worker.global_worker.node
    return node.get_temp_dir_path(), ray.util.get_node_ip_address(), seen


def refusal(root: Path, replies: list[NodeReply]) -> str | None:
    """The one-line reason `root` cannot hold a study on these nodes, or None when it can."""
    for reply in replies:
        temp = Path(reply.temp_dir).resolve()
        if root == temp or root.is_relative_to(temp):
            return (
                f"storage: {root} is inside Ray's temp dir {temp} on node {reply.address} "
                f"({reply.node_id[:12]}), which Ray deletes; {FIX}"
            )
    blind = [r for r in replies if not r.sees_marker]
    if blind:
        where = ", ".join(f"{r.address} ({r.node_id[:12]})" for r in blind)
        return (
            f"storage: {root} is not the same folder on every node: {len(blind)} of {len(replies)} "
            f"nodes cannot see the driver's files there ({where}); {FIX}"
        )
    return None


def check_shared(root: Path) -> None:
    """Refuse `root` (one line) unless every alive node of the connected cluster sees it."""
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    if len(nodes) <= 1:  # one node sees its own files; only the temp-dir rule applies
        driver = getattr(ray._private.worker.global_worker, "node", None)  # None under Ray Client
        replies = [NodeReply("local", "this node", driver.get_temp_dir_path(), True)] if driver else []
        reason = refusal(root, replies)
        if reason:
            raise UserError(reason)
        return
    existing = next(p for p in [root, *root.parents] if p.exists())
    token = secrets.token_hex(16)
    marker = root / f".vitscale-shared-check-{token[:8]}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        marker.write_text(token)
    except OSError as exc:
        raise UserError(f"storage: cannot write to {root} ({exc.strerror or exc}); {FIX}") from None
    try:
        replies = _ask_every_node(nodes, str(marker), token)
    finally:
        marker.unlink(missing_ok=True)
    reason = refusal(root, replies)
    if reason:
        _remove_created(root, existing)
        raise UserError(reason)


def _ask_every_node(nodes: list[dict], marker: str, token: str) -> list[NodeReply]:
    refs = {
        node["NodeID"]: _probe.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(marker, token)
        for node in nodes
    }
    ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=PROBE_TIMEOUT_S)
    replies = []
    for node in nodes:
        ref = refs[node["NodeID"]]
        address = node.get("NodeManagerAddress", "?")
        if ref not in ready:
            raise UserError(
                f"storage: node {address} ({node['NodeID'][:12]}) did not answer the storage check "
                f"within {PROBE_TIMEOUT_S:g} s; is it healthy? (`ray status`)"
            )
        temp_dir, ip, seen = ray.get(ref)
        replies.append(NodeReply(node["NodeID"], ip or address, temp_dir, seen))
    return replies


def _remove_created(folder: Path, existing: Path) -> None:
    """Undo the mkdir of a refused storage folder: the folders below `existing`, if left empty."""
    for path in [folder, *folder.parents]:
        if path == existing:
            return
        try:
            path.rmdir()
        except OSError:
            return
