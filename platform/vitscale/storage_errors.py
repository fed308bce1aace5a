"""Storage failures named as such: a full disk, a read-only filesystem, a locked SQLite store.

Why: they reached the user as something else. The MLflow write queue took SQLite's "database or
disk is full" for an unreachable tracking server and retried for an hour, printing MLflow's
90-line traceback every few seconds; a disk full at start was a 132-line SQLAlchemy traceback.
`classify` reads an exception (its whole chain, SQLAlchemy's wrapped `orig` too) or a logged text
and says which failure it is, where, and the fix, in one line. Whoever meets one `report`s it;
the study driver `listen`s and stops its study cleanly (see `tune.interrupt`), and `as_user_error`
turns one that escapes into a UserError. `quiet_logs` drops the tracebacks MLflow and Ray log for
the same failure, so the named line is the only one.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import re
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from vitscale.errors import UserError

FULL, READ_ONLY, LOCKED = "full", "read-only", "locked"
_ERRNOS = {errno.ENOSPC: FULL, errno.EDQUOT: FULL, errno.EROFS: READ_ONLY}
_WORDS = {  # SQLite's and the OS's words, as they appear in messages and logged tracebacks
    "database or disk is full": FULL,
    "no space left on device": FULL,
    "disk quota exceeded": FULL,
    "attempt to write a readonly database": READ_ONLY,
    "read-only file system": READ_ONLY,
    "database is locked": LOCKED,
}
_ERRNO_IN_TEXT = re.compile(r"\[errno (\d+)\]", re.IGNORECASE)  # pyarrow: "Detail: [errno 28] ..."
_SAYS = {  # kind -> (what happened, the fix)
    FULL: ("disk full", "free space on its filesystem (`df -h`)"),
    READ_ONLY: ("read-only", "make its filesystem writable"),
    LOCKED: ("locked by another process", "stop the other writer (or wait for it)"),
}
# Loggers that print a traceback for a failure vitscale names itself.
NOISY_LOGGERS = (
    "mlflow.store.db.utils",
    "ray.train._internal.syncer",
    "ray.tune.execution.experiment_state",
    "ray.tune.execution.tune_controller",
)


@dataclass(frozen=True)
class StorageFailure:
    kind: str  # FULL | READ_ONLY | LOCKED
    path: str  # the file or store that could not be written ("" when unknown)
    detail: str  # the system's own words

    @property
    def transient(self) -> bool:
        """A lock ends when its holder finishes; a full or read-only disk waits for the user."""
        return self.kind == LOCKED

    def line(self) -> str:
        what, fix = _SAYS[self.kind]
        return f"{self.path or 'the study storage'}: {what}, cannot write ({self.detail}); {fix}"


def _kind_of_text(text: str) -> str | None:
    lowered = text.lower()
    for words, kind in _WORDS.items():
        if words in lowered:
            return kind
    match = _ERRNO_IN_TEXT.search(text)
    return _ERRNOS.get(int(match.group(1))) if match else None


def _chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        orig = getattr(exc, "orig", None)  # SQLAlchemy's DBAPIError wraps the sqlite3 error
        if isinstance(orig, BaseException) and id(orig) not in seen:
            yield orig
            seen.add(id(orig))
        exc = exc.__cause__ or exc.__context__


def classify(exc: BaseException | None, path: str = "") -> StorageFailure | None:
    """The storage failure `exc` is (or was caused by), None for anything else. `path`: where the
    caller was writing, for errors that do not name their file (SQLite's never do)."""
    for link in _chain(exc):
        if isinstance(link, OSError):
            kind = _ERRNOS.get(link.errno) or _kind_of_text(str(link))
            if kind:
                return StorageFailure(kind, str(link.filename or path), link.strerror or str(link)[:200])
        if isinstance(link, sqlite3.Error):
            kind = _kind_of_text(str(link))
            if kind:
                return StorageFailure(kind, path, str(link))
    return None


def classify_text(text: str, path: str = "") -> StorageFailure | None:
    """The same for a logged message (Ray logs its syncer's failures as text)."""
    kind = _kind_of_text(text)
    return StorageFailure(kind, path, next(w for w, k in _WORDS.items() if k == kind)) if kind else None


# -- who is told --------------------------------------------------------------------------------
_listeners: list[Callable[[StorageFailure], None]] = []


def report(failure: StorageFailure) -> None:
    """Tell every listener (the study driver) about a failure met while writing."""
    for listener in list(_listeners):
        listener(failure)


@contextlib.contextmanager
def listen(listener: Callable[[StorageFailure], None]):
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


class _DropNamedFailures(logging.Filter):
    """One per `quiet_logs` (nested ones, each removing only its own, leave the outer in place)."""

    def filter(self, record: logging.LogRecord) -> bool:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None and classify(record.exc_info[1]):
            return False
        return classify_text(text) is None


@contextlib.contextmanager
def quiet_logs():
    """Within: MLflow's and Ray's logged tracebacks of a storage failure are dropped."""
    loggers = [logging.getLogger(name) for name in NOISY_LOGGERS]
    drop = _DropNamedFailures()
    for logger in loggers:
        logger.addFilter(drop)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(drop)


@contextlib.contextmanager
def as_user_error(path: str = "", then: str = ""):
    """Within: a storage failure that escapes is a UserError (its line, then `then`), with the
    loggers quiet."""
    with quiet_logs():
        try:
            yield
        except UserError:
            raise
        except Exception as exc:
            failure = classify(exc, path)
            if failure is None:
                raise
            raise UserError(failure.line() + (f"; {then}" if then else "")) from None
