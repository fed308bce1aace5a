"""`QueuedClient` names every method it has: no client call of platform code goes past the queue.

The writers (study callback, `vitscale train`, benchmark studies) and `tracking.store`'s helpers call
MlflowClient methods on whatever client they are given. A queued client without a catch-all turns a
method it does not define into an AttributeError; this test finds every MlflowClient method that
platform code calls and fails when one is neither defined on `QueuedClient` nor only ever called on
a plain MlflowClient, and when a method the class passes to the server is a write other than the
experiment setup that must precede the first queued run.
"""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest
from mlflow import MlflowClient

from vitscale.tracking.queued import QueuedClient

ROOT = Path(__file__).resolve().parents[2] / "platform" / "vitscale"
# Called only on a plain MlflowClient (store.client_for / from_mlflow._client), never on a queued one:
# model registry reads (`--from-run models:/...`) and the analysis logging its folder back.
PLAIN_CLIENT_ONLY = {
    "get_model_version",
    "get_model_version_by_alias",
    "log_artifacts",
    # The queue's sender logging a trial's MLflow Model (tracking.logged_model) and `--register`
    # (tracking.model_registry): both hold a plain client.
    "create_logged_model",
    "search_logged_models",
    "delete_logged_model",
    "get_registered_model",
    "create_registered_model",
    "create_model_version",
    "set_registered_model_alias",
}
# Sent to the server at once: a writer needs the experiment's id before its first queued run.
EXPERIMENT_SETUP = {"create_experiment", "restore_experiment", "set_experiment_tag"}
READ_PREFIXES = ("get_", "search_", "list_", "download_")


def _client_methods_called() -> dict[str, set[str]]:
    """MlflowClient method name -> the platform files that call a method of that name."""
    names = {n for n in dir(MlflowClient) if not n.startswith("_")}
    found: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in names
            ):
                found.setdefault(node.func.attr, set()).add(str(path.relative_to(ROOT)))
    return found


def _own_methods() -> dict[str, object]:
    return {n: f for n, f in vars(QueuedClient).items() if callable(f) and not n.startswith("_")}


def test_the_queued_client_has_no_catch_all():
    assert not hasattr(QueuedClient, "__getattr__")
    client = QueuedClient(queue=None)
    with pytest.raises(AttributeError):
        client.delete_run  # noqa: B018 - an MlflowClient write the class does not define


def test_every_client_method_platform_code_calls_is_named_on_the_queued_client():
    called = _client_methods_called()
    assert {"create_run", "log_batch", "set_terminated", "get_run"} <= set(called)  # the scan sees calls
    missing = {name: sorted(files) for name, files in called.items() if name not in _own_methods()}
    assert set(missing) <= PLAIN_CLIENT_ONLY, (
        f"platform code calls {missing}: queue the write in tracking/queued.py (or name the read)"
    )


def test_what_goes_to_the_server_directly_is_a_read_or_the_experiment_setup():
    direct = {name for name, f in _own_methods().items() if "self.reader." in inspect.getsource(f)}
    queued = {name for name, f in _own_methods().items() if "self.queue." in inspect.getsource(f)}
    assert {"create_run", "log_batch", "log_artifact", "set_terminated", "update_run"} <= queued
    writes = {name for name in direct if not name.startswith(READ_PREFIXES)}
    assert writes == EXPERIMENT_SETUP
    assert not direct & queued
