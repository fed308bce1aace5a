"""A new SQLite MLflow store starts as a copy of an empty, migrated one.

MLflow builds a new SQLite store by running every Alembic migration, about 5 s of CPU (2-3 s on
a quiet machine) each time a study, `vitscale train` or a test starts on a fresh file. The first
store a given MLflow version makes is kept, emptied of the default experiment, as a template in
the user's cache (`$XDG_CACHE_HOME/vitscale`, else `~/.cache/vitscale`); later new stores are a
copy of it. MLflow then finds its tables current and creates the default experiment itself, with
this store's artifact location and time. Anything unexpected falls back to MLflow's own path.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

CACHE_ENV = "XDG_CACHE_HOME"
# Rows of the default experiment (id 0) in a fresh store: MLflow re-creates it on first open.
DEFAULT_EXPERIMENT_ROWS = (
    "DELETE FROM experiment_tags WHERE experiment_id = 0",
    "DELETE FROM experiments WHERE experiment_id = 0",
)


def template_path() -> Path:
    import mlflow

    root = Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache") / "vitscale"
    return root / f"mlflow-{mlflow.__version__}-empty-store.db"


def is_new(database: Path) -> bool:
    return not database.exists()


def start_from_template(database: Path) -> bool:
    """Copy the template into `database` (which does not exist yet); False where there is none."""
    template = template_path()
    if not template.is_file():
        return False
    if not _sound(template):
        discard(template)
        return False
    try:
        _atomic_copy(template, database)
    except OSError:
        return False
    return True


def keep_as_template(database: Path) -> None:
    """After MLflow created `database` from nothing: keep an emptied copy for the next new store."""
    template = template_path()
    if template.is_file():
        return
    try:
        template.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=template.parent) as folder:
            staged = Path(folder) / "store.db"
            with (
                contextlib.closing(sqlite3.connect(database)) as source,
                contextlib.closing(sqlite3.connect(staged)) as copy,
            ):
                source.backup(copy)  # a consistent copy, whatever MLflow still holds open
                for statement in DEFAULT_EXPERIMENT_ROWS:
                    copy.execute(statement)
                copy.commit()
            os.replace(staged, template)
    except (OSError, sqlite3.Error):
        pass  # only a speed-up: the next new store is migrated by MLflow again


def _sound(template: Path) -> bool:
    """A readable SQLite file holding MLflow's schema (an Alembic version and an experiments table)."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{template}?mode=ro", uri=True)) as db:
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            return (
                db.execute("PRAGMA quick_check(1)").fetchone() == ("ok",)
                and {
                    "alembic_version",
                    "experiments",
                }
                <= tables
            )
    except sqlite3.Error:
        return False


def discard(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def _atomic_copy(source: Path, target: Path) -> None:
    """Copy next to `target`, then link it into place: a reader never sees half a database, and a
    store another process created meanwhile is never overwritten."""
    with tempfile.TemporaryDirectory(dir=target.parent) as folder:
        staged = Path(folder) / target.name
        shutil.copyfile(source, staged)
        try:
            os.link(staged, target)
        except FileExistsError:
            pass
