"""A durable, ordered queue for MLflow writes: training never waits on the tracking server.

Why: every MLflow write of a study happens on its driver (see `tune_callback`). Sent straight to
the server, one outage raised out of a Tune callback and killed the study with trials still
running, and a slow server stalled Tune's event loop. Here a write is appended to a journal on disk
(JSONL, flushed and fsync'ed) and returns at once; one background thread sends the writes in
journal order, retrying with exponential backoff for as long as the server stays away. A driver
killed during an outage leaves its unsent writes in the journal; the next process that opens the
same folder (`study resume`) sends them first.

Run ids: MLflow makes them on the server, so `create_run` returns a placeholder (`queued-<hex>`) at
once; later writes name it and the sender maps it to the real id (ids.jsonl, so the mapping
survives a restart). A create whose outcome is unknown (the connection broke mid-request, or the
driver died before noting the id) is first looked up by its QUEUE_ID tag: no duplicate runs. Every
other write is idempotent (metrics carry their own timestamp), so sending one twice is harmless.

Storage failures (`vitscale.storage_errors`: the store's disk full or read-only, the SQLite store
locked by another writer) are not outages: they are named in one line, then at most once a minute
while the writes wait, and reported to the study driver, which stops a study whose disk is full
(the writes stay in the journal for `study resume`). A journal line that cannot be written whole
(the journal's own disk full) is cut back, never left torn in the middle of the journal.

Folder: journal.jsonl (append-only), ids.jsonl (placeholder -> id), cursor.json (journal lines
done; delayed and rejected counts), rejected.jsonl (writes the server refused), lock (one process).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import threading
import time
import uuid
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vitscale import storage_errors
from vitscale.errors import UserError
from vitscale.sqlite_files import sqlite_path
from vitscale.tracking import replay, store
from vitscale.tracking.replay import PLACEHOLDER

# MLflow error codes that resending cannot fix (the request itself is wrong).
_PERMANENT = {"INVALID_PARAMETER_VALUE", "RESOURCE_ALREADY_EXISTS", "RESOURCE_DOES_NOT_EXIST", "BAD_REQUEST"}
_PERMANENT_TRIES = 3  # ... though a server coming back up may answer oddly once or twice
_SAVE_EVERY = 50
STORAGE_NOTE_EVERY_S = 60.0  # a storage failure that lasts: one line a minute, no more
STORAGE_CLOSE_WAIT_S = 5.0  # closing with the store's disk full or read-only: no hour's wait
log = logging.getLogger("vitscale.tracking")


@dataclass(frozen=True)
class QueueStats:
    queued: int  # writes ever put in this folder's journal
    sent: int
    delayed: int  # sent only after at least one failed attempt (or by a later process)
    rejected: int  # refused by the server for good (see rejected.jsonl)
    pending: int  # still in the journal, unsent: `study resume` sends them

    def line(self) -> str:
        """The summary's sentence about tracking."""
        if self.pending:
            return (
                f"tracking: {self.pending} of {self.queued} MLflow writes not yet sent (kept on disk; "
                "`vitscale study resume` sends them)"
            )
        rejected = f", {self.rejected} refused by the server" if self.rejected else ""
        if not self.delayed:
            return f"tracking: all {self.sent} MLflow writes sent{rejected}"
        return f"tracking: {self.delayed} MLflow writes delayed by the tracking server, none lost{rejected}"


def _fsync_append(handle, line: str) -> None:
    """Append one line (to a file opened "ab", unbuffered) and fsync; a write that fails half-way
    (disk full) is cut back, so the file never holds a torn line before later ones."""
    fd = handle.fileno()
    start = os.fstat(fd).st_size
    data = memoryview(line.encode())
    try:
        while data:
            data = data[os.write(fd, data) :]
        os.fsync(fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.ftruncate(fd, start)
        raise


def _read_jsonl(path: Path) -> list[dict]:
    """Complete lines only: a line torn by a kill mid-write is dropped (and cut from the file)."""
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        with path.open("r+b") as handle:
            handle.truncate(end)
    records = []
    for number, line in enumerate(data[:end].splitlines(), start=1):
        if line.strip():
            records.append(_parsed(line, path, f"line {number}"))
    return records


def _parsed(text: bytes | str, path: Path, where: str) -> Any:
    """One JSON value of the queue's files, or a UserError naming the file: a damaged queue is
    the user's to set aside (its unsent writes are then lost), never a traceback."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(
            f"{path}: {where} is not JSON ({getattr(exc, 'msg', exc)}): this study's MLflow write queue is "
            f"damaged; move {path.parent} aside to go on without the writes it still holds"
        ) from None


class WriteQueue:
    def __init__(self, directory: str | Path, tracking_uri: str, max_backoff: float = 10.0) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.tracking_uri = tracking_uri
        self.max_backoff = max_backoff
        self.closed = False
        self._lock_file = (self.directory / "lock").open("a")
        try:
            fcntl.flock(self._lock_file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock_file.close()
            raise UserError(
                f"{self.directory}: another live process is sending this study's MLflow writes; "
                "stop it (or wait for it) before resuming"
            ) from None
        self._cond = threading.Condition()
        self._ids = {r["ref"]: r["id"] for r in _read_jsonl(self.directory / "ids.jsonl")}
        cursor_file = self.directory / "cursor.json"
        cursor = (
            _parsed(cursor_file.read_bytes(), cursor_file, "its content") if cursor_file.is_file() else {}
        )
        self._done = cursor.get("done", 0)
        self._delayed = cursor.get("delayed", 0)
        self._rejected = cursor.get("rejected", 0)
        records = _read_jsonl(self.directory / "journal.jsonl")
        self._seq = len(records)
        self.created: dict[str, dict[str, str]] = {}  # placeholder -> tags it was created with
        # (tag, value) -> the placeholders created with it, in journal order: `find` reads the
        # runs that share a tag (a trial id: one run), not every run of the study, per trial
        self._created_with: dict[tuple[str, str], list[str]] = {}
        self.steps: dict[str, int] = {}  # run -> highest metric step written
        for record in records:
            self._index(record)
        self._pending: deque[dict] = deque(dict(r, _replayed=True) for r in records[self._done :])
        self._failures = 0
        self.storage_failure: storage_errors.StorageFailure | None = None
        self._storage_noted = float("-inf")
        self._stopping = False
        self._client = None
        self._journal = (self.directory / "journal.jsonl").open("ab", buffering=0)
        self._ids_file = (self.directory / "ids.jsonl").open("ab", buffering=0)
        self._rejects = (self.directory / "rejected.jsonl").open("ab", buffering=0)
        self._thread = threading.Thread(target=self._send_loop, name="vitscale-tracking-queue", daemon=True)
        self._thread.start()

    # -- writing ------------------------------------------------------------------------------
    def submit(self, op: str, run: str | None, **args: Any) -> None:
        """Append one write to the journal (durable when this returns); the sender does the rest."""
        with self._cond:
            if self.closed:
                raise RuntimeError(f"tracking queue {self.directory} is closed")
            record = {"seq": self._seq, "t": int(time.time() * 1000), "op": op, "run": run, **args}
            try:
                _fsync_append(self._journal, json.dumps(record, separators=(",", ":")) + "\n")
            except OSError as exc:
                failure = storage_errors.classify(exc, str(self.directory / "journal.jsonl"))
                if failure is None:
                    raise
                # Not durable, so not sent: the study stops (see the module docstring), and the
                # resumed trial reports again from its last checkpoint.
                self._storage_failed(failure)
                return
            self._seq += 1
            self._index(record)
            self._pending.append(dict(record, _mark=self._failures))
            self._cond.notify_all()

    def create_run(self, experiment_id: str, tags: dict[str, str], run_name: str | None) -> str:
        ref = PLACEHOLDER + uuid.uuid4().hex
        self.submit("create_run", None, ref=ref, experiment_id=experiment_id, tags=tags, run_name=run_name)
        return ref

    def _index(self, record: dict) -> None:
        if record["op"] == "create_run":
            self.created[record["ref"]] = record["tags"]
            for tag in record["tags"].items():
                self._created_with.setdefault(tag, []).append(record["ref"])
        for metric in record.get("metrics") or ():
            self.steps[record["run"]] = max(self.steps.get(record["run"], -1), metric["step"])

    def find(self, **tags: str) -> str | None:
        """The newest run this journal created with these tags (its placeholder), or None."""
        if not tags:
            return next(reversed(self.created), None)
        candidates = min((self._created_with.get(tag, []) for tag in tags.items()), key=len)
        found = [ref for ref in candidates if all(self.created[ref].get(k) == v for k, v in tags.items())]
        return found[-1] if found else None

    def resolve(self, run: str, timeout: float | None = None) -> str:
        """The MLflow id of `run` (a placeholder waits, up to `timeout`, until its create is sent)."""
        if not run.startswith(PLACEHOLDER):
            return run
        with self._cond:
            self._cond.wait_for(lambda: run in self._ids or self.closed, timeout)
            if run not in self._ids:
                raise TimeoutError(f"run {run} is not created in MLflow yet (server unreachable?)")
            return self._ids[run]

    # -- sending ------------------------------------------------------------------------------
    def _send_loop(self) -> None:
        backoff, outage_since = 0.5, None
        while True:
            with self._cond:
                self._cond.wait_for(lambda: self._pending or self._stopping)
                if not self._pending or (self._stopping and outage_since is not None):
                    return
                record = self._pending[0]
            try:
                self._send(record)
            except Exception as exc:  # noqa: BLE001 - any failure but a refusal is an outage
                record["_tries"] = record.get("_tries", 0) + 1
                if _is_permanent(exc) and record["_tries"] >= _PERMANENT_TRIES:
                    self._reject(record, exc)
                    continue
                with self._cond:
                    self._failures += 1
                failure = storage_errors.classify(exc, str(sqlite_path(self.tracking_uri) or ""))
                if failure is not None:
                    self._storage_failed(failure)
                    outage_since = outage_since or time.monotonic()
                elif outage_since is None:
                    outage_since = time.monotonic()
                    log.warning(
                        "tracking server unreachable (%s); MLflow writes are queued in %s and sent "
                        "when it is back",
                        str(exc).splitlines()[0][:200],
                        self.directory,
                    )
                with self._cond:
                    self._cond.wait_for(lambda: self._stopping, backoff)
                backoff = min(backoff * 2, self.max_backoff)
                continue
            if outage_since is not None:
                log.warning(
                    "%s after %.0f s; sending queued writes",
                    "tracking store writable again" if self.storage_failure else "tracking server back",
                    time.monotonic() - outage_since,
                )
                backoff, outage_since, self.storage_failure = 0.5, None, None
            self._finish(record, delayed=record.get("_replayed") or record["_mark"] != self._failures)

    def _storage_failed(self, failure: storage_errors.StorageFailure) -> None:
        """Name the failure (first time, then once a minute) and tell the study driver."""
        first = self.storage_failure is None
        self.storage_failure = failure
        now = time.monotonic()
        if first or now - self._storage_noted >= STORAGE_NOTE_EVERY_S:
            self._storage_noted = now
            log.warning("%s; MLflow writes wait in %s", failure.line(), self.directory)
        if first:
            storage_errors.report(failure)

    def _finish(self, record: dict, delayed: bool) -> None:
        with self._cond:
            self._pending.popleft()
            self._done += 1
            self._delayed += bool(delayed)
            if not self._pending or self._done % _SAVE_EVERY == 0:
                self._save_cursor()
            self._cond.notify_all()

    def _reject(self, record: dict, exc: Exception) -> None:
        log.warning("MLflow refused a write (%s): %s", record["op"], str(exc).splitlines()[0][:300])
        clean = {k: v for k, v in record.items() if not k.startswith("_")}
        _fsync_append(self._rejects, json.dumps({**clean, "error": str(exc)[:2000]}) + "\n")
        with self._cond:
            self._rejected += 1
        self._finish(record, delayed=False)

    def _save_cursor(self) -> None:
        """Atomically; when the disk is full the old cursor stays (resending is idempotent)."""
        tmp = self.directory / "cursor.json.tmp"
        state = {"done": self._done, "delayed": self._delayed, "rejected": self._rejected}
        try:
            with tmp.open("w") as handle:
                handle.write(json.dumps(state))
                handle.flush()
                os.fsync(handle.fileno())
            tmp.replace(self.directory / "cursor.json")
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            failure = storage_errors.classify(exc, str(tmp))
            if failure is None:
                raise
            self._storage_failed(failure)

    def _send(self, record: dict) -> None:
        if self._client is None:
            # One attempt per request: this loop is the retry (MLflow's own would hold it for minutes).
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
            os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "30")
            self._client = store.client_for(self.tracking_uri)
        if record["op"] != "create_run":
            replay.send(self._client, record, self._ids, self.tracking_uri)
        elif record["ref"] not in self._ids:
            run_id = replay.create(
                self._client,
                record,
                look_first=bool(record.get("_tries") or record.get("_replayed")),
                ids=self._ids,
            )
            _fsync_append(self._ids_file, json.dumps({"ref": record["ref"], "id": run_id}) + "\n")
            with self._cond:
                self._ids[record["ref"]] = run_id
                self._cond.notify_all()

    # -- closing ------------------------------------------------------------------------------
    def stats(self) -> QueueStats:
        with self._cond:
            return QueueStats(
                self._seq, self._done - self._rejected, self._delayed, self._rejected, len(self._pending)
            )

    def wait_sent(self, timeout: float | None = None, every: float = 30.0) -> bool:
        """Wait until every queued write is sent (True) or `timeout` passes (False), saying why."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while self._pending:
                left = every if deadline is None else min(every, deadline - time.monotonic())
                if left <= 0:
                    return False
                if self.storage_failure is not None:
                    left = min(left, STORAGE_NOTE_EVERY_S)
                if not self._cond.wait_for(lambda: not self._pending, left):
                    waiting_for = (
                        self.storage_failure.line()
                        if self.storage_failure
                        else f"the tracking server {self.tracking_uri}"
                    )
                    log.warning(
                        "waiting (%s): %d MLflow writes queued in %s",
                        waiting_for,
                        len(self._pending),
                        self.directory,
                    )
            return True

    def close(self, timeout: float | None = None) -> QueueStats:
        """Send what is queued (up to `timeout`; a few seconds while the store's disk is full or
        read-only: only the user can fix that), stop the sender, keep the rest on disk."""
        if self.storage_failure is not None and not self.storage_failure.transient:
            timeout = STORAGE_CLOSE_WAIT_S if timeout is None else min(timeout, STORAGE_CLOSE_WAIT_S)
        self.wait_sent(timeout)
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._thread.join(timeout=max(1.0, float(os.environ.get("MLFLOW_HTTP_REQUEST_TIMEOUT", 30))))
        with self._cond:
            self.closed = True
            self._save_cursor()
            self._cond.notify_all()
        stats = self.stats()
        for handle in (self._journal, self._ids_file, self._rejects, self._lock_file):
            handle.close()
        return stats


def _is_permanent(exc: Exception) -> bool:
    if isinstance(exc, KeyError):
        return True
    return getattr(exc, "error_code", None) in _PERMANENT
