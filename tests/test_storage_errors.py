"""Which failures are storage failures, what their line says, and which are transient."""

from __future__ import annotations

import errno
import logging
import sqlite3

import pytest

from vitscale import storage_errors
from vitscale.errors import UserError


def _wrapped(inner: BaseException) -> Exception:
    """As MLflow raises it: its own exception, raised from SQLAlchemy's, which wraps sqlite3's."""
    from mlflow.exceptions import MlflowException
    from sqlalchemy.exc import OperationalError

    try:
        try:
            raise OperationalError("INSERT INTO metrics ...", {}, inner)
        except OperationalError as exc:
            raise MlflowException(str(exc)) from exc
    except MlflowException as outer:
        return outer


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (OSError(errno.ENOSPC, "No space left on device", "/d/journal.jsonl"), storage_errors.FULL),
        (OSError(errno.EDQUOT, "Disk quota exceeded"), storage_errors.FULL),
        (OSError(errno.EROFS, "Read-only file system", "/d/x"), storage_errors.READ_ONLY),
        (OSError("Error writing bytes to file. Detail: [errno 28] No space left"), storage_errors.FULL),
        (_wrapped(sqlite3.OperationalError("database or disk is full")), storage_errors.FULL),
        (
            _wrapped(sqlite3.OperationalError("attempt to write a readonly database")),
            storage_errors.READ_ONLY,
        ),
        (_wrapped(sqlite3.OperationalError("database is locked")), storage_errors.LOCKED),
    ],
)
def test_storage_failures_are_named_with_their_path_and_fix(exc, kind):
    failure = storage_errors.classify(exc, "/d/mlflow.db")
    assert failure is not None and failure.kind == kind
    assert failure.transient == (kind == storage_errors.LOCKED)
    line = failure.line()
    assert "\n" not in line and line.startswith(str(getattr(exc, "filename", None) or "/d/mlflow.db"))
    assert {"full": "free space", "read-only": "writable", "locked": "stop the other writer"}[kind] in line


@pytest.mark.parametrize(
    "exc", [OSError(errno.ECONNREFUSED, "Connection refused"), ValueError("disk"), KeyError("full")]
)
def test_other_failures_are_not_storage_failures(exc):
    assert storage_errors.classify(exc) is None


def test_an_escaping_failure_is_one_line_and_its_logged_traceback_is_dropped(caplog):
    logger = logging.getLogger(storage_errors.NOISY_LOGGERS[0])
    with pytest.raises(UserError, match=r"^/d/mlflow.db: disk full, cannot write .*; free space"):
        with storage_errors.as_user_error("/d/mlflow.db"):
            with storage_errors.quiet_logs():  # a nested one leaves the outer filter in place
                pass
            try:
                raise _wrapped(sqlite3.OperationalError("database or disk is full"))
            except Exception:
                logger.exception("SQLAlchemy database error. The following exception is caught.")
                raise
    assert "SQLAlchemy database error" not in caplog.text
