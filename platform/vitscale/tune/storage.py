"""Whether every node of the cluster sees a study's storage. Where executions live and their
records are `tune.execution_files`'s (without Ray); this module re-exports those names.

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

import secrets
from dataclasses import dataclass
from pathlib import Path

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from vitscale.errors import UserError
from vitscale.tune.execution_files import (  # noqa: F401 - re-exported: callers read storage.X
    JOB_DEFAULT_BASE,
    JOB_ENV,
    LATEST_FILE,
    ROOT_ENV,
    STATE_FILE,
    absolute_sqlite,
    base,
    in_submitted_job,
    new_execution_folder,
    read_state,
    resolve,
    write_atomically,
    write_state,
)

FIX = "put it on storage every node mounts: --set storage=/shared/path"
PROBE_TIMEOUT_S = 120.0


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
