"""Damaged state is one line naming the file and the fix, never a traceback: a garbled or
truncated SQLite store (mlflow.db, optuna.db), an emptied optuna.db at resume, a garbled line of
the MLflow write queue."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import optuna
import pytest

from vitscale.errors import UserError
from vitscale.sqlite_files import check_sqlite
from vitscale.study import load_study
from vitscale.tracking.queue import WriteQueue
from vitscale.tune.optuna_study import DB_FILE, check_resumable, study_names

REPO = Path(__file__).resolve().parents[1]


def _store(path, rows=2000):
    with sqlite3.connect(path) as db:
        db.execute("create table t (k integer primary key, v text)")
        db.executemany("insert into t (v) values (?)", [("x" * 200,) for _ in range(rows)])
    return path


def _garble(path):
    data = bytearray(path.read_bytes())
    data[:100] = b"\x00" * 100  # the header
    path.write_bytes(bytes(data))


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


@pytest.mark.parametrize("damage", [_garble, _truncate])
def test_a_damaged_sqlite_file_is_one_line_naming_it(tmp_path, damage):
    path = _store(tmp_path / "mlflow.db")
    check_sqlite(f"sqlite:///{path}", "tracking.uri", "fix it")  # sound: passes
    damage(path)
    with pytest.raises(UserError) as caught:
        check_sqlite(f"sqlite:///{path}", "tracking.uri", "restore it from a copy")
    message = str(caught.value)
    assert message.startswith(f"tracking.uri: {path} is not a sound SQLite database (")
    assert message.endswith("restore it from a copy") and "\n" not in message


KILLED_WRITER = """
import os, signal, sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("PRAGMA cache_size=1")  # changed pages spill into the file: its journal is needed
db.execute("BEGIN")
db.execute("update t set v = 'y' || v")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_writer_killed_mid_transaction_is_rolled_back_not_refused(tmp_path):
    """A study driver killed while MLflow wrote leaves a hot journal; `study resume` once called
    the store unsound, since a read-only connection cannot roll the journal back."""
    path = _store(tmp_path / "mlflow.db")
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], check=False)
    assert (tmp_path / "mlflow.db-journal").stat().st_size > 0
    with pytest.raises(sqlite3.OperationalError, match="readonly"):  # what the check used to see
        sqlite3.connect(f"file:{path}?mode=ro", uri=True).execute("PRAGMA quick_check(1)").fetchone()
    check_sqlite(f"sqlite:///{path}", "tracking.uri", "restore it from a copy")
    with sqlite3.connect(path) as db:  # the killed transaction is gone, every row as committed
        assert db.execute("select count(*), min(v) = max(v) from t").fetchone() == (2000, 1)
        assert db.execute("select v from t limit 1").fetchone() == ("x" * 200,)


def test_an_absent_or_empty_file_is_a_new_store(tmp_path):
    check_sqlite(f"sqlite:///{tmp_path / 'absent.db'}", "tracking.uri", "")
    (tmp_path / "empty.db").write_bytes(b"")
    check_sqlite(f"sqlite:///{tmp_path / 'empty.db'}", "tracking.uri", "")
    check_sqlite("http://127.0.0.1:5000", "tracking.uri", "")  # not a file: not ours to check


def test_analyze_of_a_garbled_store_is_one_line_and_exit_2(tmp_path):
    path = _store(tmp_path / "mlflow.db")
    _garble(path)
    proc = subprocess.run(
        [sys.executable, "-m", "vitscale", "analyze", "quickstart", "--tracking-uri", f"sqlite:///{path}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and errors[0].startswith(f"error: tracking.uri: {path} is not a sound SQLite")


def test_resume_refuses_an_emptied_or_garbled_optuna_db_in_one_line(tmp_path):
    spec = load_study(REPO / "studies" / "ssog_search.yaml")  # a TPE study
    url = f"sqlite:///{tmp_path / DB_FILE}"
    optuna.create_study(study_name=spec.name, storage=url).optimize(lambda t: t.suggest_float("x", 0, 1), 2)
    check_resumable(tmp_path, url, spec)  # as written: resumable
    (tmp_path / DB_FILE).write_bytes(b"")  # emptied
    with pytest.raises(UserError, match=r"holds no Optuna study 'ssog-search' \(emptied or replaced\?\)"):
        check_resumable(tmp_path, url, spec)
    arm = tmp_path / "tune-0"
    arm.mkdir()
    _garble(_store(arm / DB_FILE))
    comparison = load_study(REPO / "studies" / "tuned_quickstart.yaml")
    with pytest.raises(UserError, match=r"^optuna\.db: .*tune-0/optuna\.db is not a sound SQLite database"):
        check_resumable(tmp_path, "", comparison)  # an arm's database, as executions kept them before


def test_resume_of_a_comparison_needs_the_studies_of_the_arms_that_began_tuning(tmp_path):
    """The arms share the execution's optuna.db: each arm whose tuning phase folder exists must
    find its study there; arms not begun yet have none."""
    comparison = load_study(REPO / "studies" / "tuned_quickstart.yaml")
    url = f"sqlite:///{tmp_path / DB_FILE}"
    first, second = study_names(comparison)[:2]
    optuna.create_study(study_name=first, storage=url)
    (tmp_path / "tune-0").mkdir()
    check_resumable(tmp_path, url, comparison)  # arm 0 began, and its study is there
    (tmp_path / "tune-1").mkdir()
    with pytest.raises(UserError, match=f"holds no Optuna study '{second}'"):
        check_resumable(tmp_path, url, comparison)


@pytest.mark.parametrize("name", ["journal.jsonl", "ids.jsonl", "cursor.json"])
def test_a_garbled_write_queue_file_is_one_line_naming_it(tmp_path, name):
    queue = tmp_path / "queue"
    queue.mkdir()
    lines = {
        "journal.jsonl": '{"seq": 0, "op": "x", "run": null}\n',
        "ids.jsonl": '{"ref": "a", "id": "b"}\n',
    }
    for file, good in lines.items():
        (queue / file).write_text(good)
    (queue / "cursor.json").write_text('{"done": 0}')
    path = queue / name
    text = path.read_text()
    path.write_text(text.replace("}", "} garbled", 1) + text if name != "cursor.json" else '{"done": 0')
    with pytest.raises(UserError) as caught:
        WriteQueue(queue, f"sqlite:///{tmp_path / 'mlflow.db'}")
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "is not JSON" in message and f"move {queue} aside" in message
