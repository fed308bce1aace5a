"""Execution folders: two drivers started in the same second each claim their own, and the record
keeps a sqlite store's absolute path (tune.storage)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from vitscale.errors import UserError
from vitscale.tune import storage


def test_drivers_started_in_the_same_second_each_claim_a_folder_of_their_own(tmp_path):
    study = tmp_path / "results" / "quickstart"
    with ThreadPoolExecutor(8) as pool:
        claimed = list(pool.map(lambda _: storage.new_execution_folder(study, "20260101-120000"), range(8)))
    assert len(set(claimed)) == 8 and all(folder.is_dir() for folder in claimed)
    assert sorted(folder.name for folder in claimed)[0] == "20260101-120000"
    (study / "20260101-130000").write_text("a file where the folder would go")
    assert storage.new_execution_folder(study, "20260101-130000").name == "20260101-130000x"


def test_a_study_folder_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(UserError, match=r"^storage: cannot create .*file/quickstart"):
        storage.new_execution_folder(tmp_path / "file" / "quickstart", "20260101-120000")


def test_a_relative_sqlite_store_is_recorded_by_its_absolute_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert storage.absolute_sqlite("sqlite:///mlflow.db") == f"sqlite:///{tmp_path / 'mlflow.db'}"
    assert (
        storage.absolute_sqlite("sqlite:///./db/m.db?timeout=30")
        == f"sqlite:///{tmp_path / 'db/m.db'}?timeout=30"
    )
    for unchanged in ("sqlite:////abs/mlflow.db", "sqlite:///:memory:", "sqlite://", "http://127.0.0.1:5000"):
        assert storage.absolute_sqlite(unchanged) == unchanged
    assert Path(storage.absolute_sqlite("sqlite:///mlflow.db").removeprefix("sqlite:///")).is_absolute()
