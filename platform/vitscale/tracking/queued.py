"""`QueuedClient`: the MlflowClient methods vitscale writes with, sent through a `WriteQueue`.

Why a stand-in rather than new calls: the writers (the study callback, `vitscale train`, `bench`)
and `tracking.store`'s helpers keep calling `create_run`, `log_batch`, `set_terminated`... as on an
MlflowClient; only where the client comes from changes. Writes return at once (a placeholder id
from `create_run`); reads go to the server, with placeholders resolved to real ids first. Every
method is named here, passed-through ones too: there is no catch-all, so a client call this class
does not know fails loudly instead of going straight to the server past the queue
(tests/tracking/test_queue_bypass.py checks every MlflowClient method platform code calls).
"""

from __future__ import annotations

import os
import tempfile
import threading
import time
from pathlib import Path
from types import SimpleNamespace

from vitscale.tracking import store
from vitscale.tracking.queue import QueueStats, WriteQueue

QUEUE_DIR = "tracking-queue"  # inside an execution folder or a checkpoint folder
_open: dict[str, WriteQueue] = {}
_open_lock = threading.Lock()


def open_queue(directory: str | Path, tracking_uri: str) -> WriteQueue:
    """The one queue of this process for `directory` (the study driver and its callback share it)."""
    key = str(Path(directory).resolve())
    with _open_lock:
        queue = _open.get(key)
        if queue is None or queue.closed:
            queue = _open[key] = WriteQueue(key, tracking_uri)
        return queue


def open_pending(root: str | Path, tracking_uri: str, name: str = QUEUE_DIR) -> None:
    """Start sending what queues under `root` still hold (a driver killed in an outage left them)."""
    for directory in sorted(Path(root).rglob(name)):
        if directory.is_dir():
            open_queue(directory, tracking_uri)


def close_all(timeout: float | None = None) -> QueueStats:
    """Send and close every queue of this process; their stats added up. Waits for the server up to
    `timeout` seconds (default $VITSCALE_TRACKING_WAIT_S, else an hour); unsent writes stay on disk."""
    if timeout is None:
        timeout = float(os.environ.get("VITSCALE_TRACKING_WAIT_S", 3600))
    with _open_lock:
        queues = [q for q in _open.values() if not q.closed]
        _open.clear()
    totals = [q.close(timeout) for q in queues]
    return QueueStats(*(sum(getattr(s, f) for s in totals) for f in QueueStats.__dataclass_fields__))


class QueuedClient:
    def __init__(self, queue: WriteQueue) -> None:
        self.queue = queue
        self._reader = None

    @property
    def reader(self):
        """A plain MlflowClient for the reads and the experiment setup below (named one by one:
        a method this class does not define is an AttributeError, never a write past the queue)."""
        if self._reader is None:
            self._reader = store.client_for(self.queue.tracking_uri)
        return self._reader

    # -- writes: queued -----------------------------------------------------------------------
    def create_run(self, experiment_id: str, start_time=None, tags=None, run_name=None):
        tags = {k: str(v) for k, v in (tags or {}).items()}
        ref = self.queue.create_run(experiment_id, tags, run_name)
        return SimpleNamespace(
            info=SimpleNamespace(run_id=ref, experiment_id=experiment_id, run_name=run_name)
        )

    def log_batch(self, run_id: str, metrics=(), params=(), tags=(), synchronous=None) -> None:
        self.queue.submit(
            "log_batch",
            run_id,
            metrics=[
                {"key": m.key, "value": m.value, "timestamp": m.timestamp, "step": m.step} for m in metrics
            ],
            params=[[p.key, str(p.value)] for p in params],
            tags=[[t.key, str(t.value)] for t in tags],
        )

    def log_metric(self, run_id: str, key: str, value: float, timestamp=None, step=None) -> None:
        metric = {"key": key, "value": float(value), "timestamp": timestamp or int(time.time() * 1000)}
        self.queue.submit("log_batch", run_id, metrics=[{**metric, "step": step or 0}])

    def log_param(self, run_id: str, key: str, value) -> None:
        self.queue.submit("log_batch", run_id, params=[[key, str(value)]])

    def update_run(self, run_id: str, status: str | None = None, name: str | None = None) -> None:
        self.queue.submit("update_run", run_id, status=status, name=name)

    def set_terminated(self, run_id: str, status: str | None = None, end_time=None) -> None:
        self.queue.submit("set_terminated", run_id, status=status)

    def log_text(self, run_id: str, text: str, artifact_file: str) -> None:
        self.queue.submit("log_text", run_id, text=text, artifact_file=artifact_file)

    def log_artifact(self, run_id: str, local_path: str, artifact_path: str | None = None) -> None:
        """The file is read when the write is sent: it must still exist then (the queue is drained
        before the writer exits)."""
        self.queue.submit(
            "log_artifact", run_id, local_path=str(Path(local_path).resolve()), artifact_path=artifact_path
        )

    def log_model(self, run_id: str, folder: str, name: str, step: int) -> None:
        """The served model in `folder` as the run's MLflow Model `name` at `step`
        (tracking.logged_model); read when sent, like log_artifact's file."""
        self.queue.submit("log_model", run_id, folder=str(Path(folder).resolve()), name=name, step=int(step))

    def log_inputs(self, run_id: str, inputs: list[dict]) -> None:
        """Dataset inputs as `tracking.datasets.dataset_inputs` describes them (JSON-able)."""
        self.queue.submit("log_inputs", run_id, inputs=inputs)

    # -- reads: from the server ---------------------------------------------------------------
    def resolve(self, run_id: str, timeout: float | None = 600) -> str:
        return self.queue.resolve(run_id, timeout)

    def get_run(self, run_id: str):
        return self.reader.get_run(self.resolve(run_id))

    def get_metric_history(self, run_id: str, key: str):
        return self.reader.get_metric_history(self.resolve(run_id), key)

    def get_experiment(self, experiment_id: str):
        return self.reader.get_experiment(experiment_id)

    def get_experiment_by_name(self, name: str):
        return self.reader.get_experiment_by_name(name)

    def search_experiments(self, *args, **kwargs):
        return self.reader.search_experiments(*args, **kwargs)

    def search_runs(self, *args, **kwargs):
        return self.reader.search_runs(*args, **kwargs)

    def list_artifacts(self, run_id: str, path: str | None = None):
        return self.reader.list_artifacts(self.resolve(run_id), path)

    def download_artifacts(self, run_id: str, path: str, dst_path: str | None = None) -> str:
        return self.reader.download_artifacts(self.resolve(run_id), path, dst_path)

    # -- experiment setup: sent at once ------------------------------------------------------
    # A writer needs the experiment's id before it can queue its first run, so these three run on
    # the server directly (`store.ensure_experiment`); they precede every queued write.
    def create_experiment(self, name: str, artifact_location: str | None = None, tags=None) -> str:
        return self.reader.create_experiment(name, artifact_location, tags)

    def restore_experiment(self, experiment_id: str) -> None:
        self.reader.restore_experiment(experiment_id)

    def set_experiment_tag(self, experiment_id: str, key: str, value) -> None:
        self.reader.set_experiment_tag(experiment_id, key, value)


def queued_client(tracking_uri: str, directory: str | Path | None = None) -> QueuedClient:
    """A QueuedClient whose journal lives in `directory` (a fresh temporary folder when None:
    rides out an outage while the process lives, but nothing resumes it)."""
    if directory is None:
        directory = tempfile.mkdtemp(prefix="vitscale-tracking-")
    return QueuedClient(open_queue(directory, tracking_uri))
