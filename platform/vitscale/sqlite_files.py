"""SQLite files the user owns (the MLflow store, an execution's optuna.db), checked before use.

A truncated or overwritten store otherwise surfaces deep inside SQLAlchemy as a 100-line
traceback; here it is one line naming the file and what to do. The check opens the file
read-only and runs `PRAGMA quick_check` (0.25 s for a 15 MB store), or only reads the schema of
a file too large for that to be cheap. A hot journal (a writer killed mid-transaction) is rolled
back first, as any read-write open would: a killed study resumes.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

from vitscale.errors import UserError

SQLITE_PREFIX = "sqlite:///"
QUICK_CHECK_MAX_BYTES = 256 * 2**20
BUSY_WAIT_S = 30.0  # another process writing: wait as MLflow and Optuna would, then say so


def sqlite_path(url: str) -> Path | None:
    """The file of a sqlite:/// URL, None for anything else."""
    return Path(url.removeprefix(SQLITE_PREFIX)) if url.startswith(SQLITE_PREFIX) else None


def check_sqlite(url: str, key: str, fix: str) -> None:
    """UserError naming `key` and `fix` when the SQLite file behind `url` exists but cannot be
    read as a sound database. An absent or empty file passes: it is a new store."""
    path = sqlite_path(url)
    if path is None or not path.is_file() or path.stat().st_size == 0:
        return
    query = (
        "PRAGMA quick_check(1)" if path.stat().st_size <= QUICK_CHECK_MAX_BYTES else "PRAGMA schema_version"
    )
    try:
        answer = _ask(path, query)
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise UserError(
                f"{key}: {path} is locked by another process (SQLite: {exc}) for over {BUSY_WAIT_S:.0f} s; "
                "wait for it or stop it"
            ) from None
        raise _damaged(key, path, str(exc), fix) from None
    except sqlite3.DatabaseError as exc:
        raise _damaged(key, path, str(exc), fix) from None
    if query.startswith("PRAGMA quick_check") and answer != "ok":
        raise _damaged(key, path, str(answer), fix)


def _ask(path: Path, query: str):
    """The answer to `query`, read-only. A writer killed mid-transaction (a study driver stopped
    with SIGKILL while MLflow wrote) leaves a hot journal, which a read-only connection cannot roll
    back ("attempt to write a readonly database"): then the file is opened read-write, and SQLite
    rolls the journal back as it would for MLflow's own first connection."""
    try:
        return _ask_once(f"file:{path}?mode=ro", query)
    except sqlite3.OperationalError as exc:
        if "readonly" not in str(exc) or not _journal(path).is_file():
            raise
    return _ask_once(f"file:{path}", query)


def _ask_once(uri: str, query: str):
    with contextlib.closing(sqlite3.connect(uri, uri=True, timeout=BUSY_WAIT_S)) as db:
        (answer,) = db.execute(query).fetchone()
    return answer


def _journal(path: Path) -> Path:
    return path.with_name(f"{path.name}-journal")


def _damaged(key: str, path: Path, why: str, fix: str) -> UserError:
    return UserError(f"{key}: {path} is not a sound SQLite database ({why}); {fix}")
