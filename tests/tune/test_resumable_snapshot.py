"""The repairs `tune.resumable_snapshot` makes to Ray's experiment snapshot, each on Ray's own
parts: its background uploader over a slow filesystem, and its trial checkpoint manager."""

from __future__ import annotations

import time

import pyarrow.fs
import pytest
from ray import tune
from ray.train._internal import checkpoint_manager, storage
from ray.train._internal.session import _TrainingResult
from ray.train._internal.storage import _FilesystemSyncer
from ray.tune.execution.tune_controller import TuneController

from vitscale.tune.resumable_snapshot import (
    ResumableSnapshot,
    delete_unless_gone,
    save_after_upload,
    upload_state_last,
)
from vitscale.tune.signed_storage import SigningHandler

STATE_FILES = ("basic-variant-state-s.json", "experiment_state-s.json")  # uploaded in this order


@pytest.fixture(autouse=True)
def ray_as_shipped(monkeypatch):
    """Ray's own functions, unwrapped, whatever a study fitted in this process installed before;
    put back as they were after each test."""
    for owner, name in (
        (TuneController, "save_to_dir"),
        (storage, "_upload_to_fs_path"),
        (checkpoint_manager, "_delete_fs_path"),
    ):
        current = getattr(owner, name)
        monkeypatch.setattr(owner, name, getattr(current, "wraps", current))


class SlowUpload(SigningHandler):
    """The local filesystem (as vitscale's storage passes files through), with the upload of the
    experiment state 0.5 s late: a searcher state is on storage while the trials it goes with are
    still on their way."""

    def __init__(self):
        super().__init__(signing=False)

    def open_output_stream(self, path, metadata):
        if path.endswith(STATE_FILES[1]):
            time.sleep(0.5)
        return super().open_output_stream(path, metadata)


class Controller:
    """What `save_to_dir` needs of Tune's controller: its storage's uploader, and a snapshot that
    rewrites every state file in the staging folder (as `TuneController.save_to_dir` does)."""

    def __init__(self, staging, syncer):
        self.staging, self._storage = staging, type("Storage", (), {"syncer": syncer})()
        self.version = 0

    def save_to_dir(self):
        self.version += 1
        for name in STATE_FILES:
            (self.staging / name).write_text(str(self.version))


def _uploaded_while_saving(tmp_path, save) -> list[str]:
    """The state files on storage after a snapshot `save` taken while the previous one uploads."""
    staging, stored = tmp_path / "staging", tmp_path / "storage"
    staging.mkdir(parents=True)
    syncer = _FilesystemSyncer(storage_filesystem=pyarrow.fs.PyFileSystem(SlowUpload()), sync_timeout=60)
    controller = Controller(staging, syncer)
    controller.save_to_dir()
    syncer.sync_up(str(staging), str(stored))  # snapshot 1 on its way
    deadline = time.monotonic() + 30
    while _read(stored / STATE_FILES[0]) != "1" and time.monotonic() < deadline:
        time.sleep(0.01)  # its first file is up, the second is 0.5 s late
    save(controller)  # snapshot 2, as the controller's next checkpoint() writes it
    syncer.wait()
    return [(stored / name).read_text() for name in STATE_FILES]


def _read(path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


def test_a_snapshot_waits_for_the_previous_upload(tmp_path):
    torn = _uploaded_while_saving(tmp_path / "ray", Controller.save_to_dir)
    assert torn == ["1", "2"]  # Ray's own order: a searcher state older than its trials
    assert _uploaded_while_saving(tmp_path / "repaired", save_after_upload(Controller.save_to_dir)) == [
        "1",
        "1",
    ]


class KilledMidUpload(SigningHandler):
    """The local filesystem, whose driver dies as the second file of an upload is written."""

    def __init__(self):
        super().__init__(signing=False)
        self.written = 0

    def open_output_stream(self, path, metadata):
        self.written += 1
        if self.written == 2:
            raise KeyboardInterrupt("the driver is killed")
        return super().open_output_stream(path, metadata)


def _storage_after_a_kill_mid_upload(tmp_path, upload) -> list[str]:
    """The state files on storage, where snapshot 1 was, after the upload of snapshot 2 died."""
    staging, stored = tmp_path / "staging", tmp_path / "storage"
    for folder, version in ((stored, "1"), (staging, "2")):
        (folder / "trial_0").mkdir(parents=True)
        for name in STATE_FILES:
            (folder / name).write_text(version)
    with pytest.raises(KeyboardInterrupt):
        upload(local_path=str(staging), fs=pyarrow.fs.PyFileSystem(KilledMidUpload()), fs_path=str(stored))
    return [(stored / name).read_text() for name in STATE_FILES]


def test_a_driver_killed_mid_upload_leaves_the_previous_snapshot_whole(tmp_path):
    torn = _storage_after_a_kill_mid_upload(tmp_path / "ray", storage._upload_to_fs_path)
    assert sorted(torn) == ["1", "2"]  # Ray's own: one file of each snapshot
    kept = _storage_after_a_kill_mid_upload(
        tmp_path / "repaired", upload_state_last(storage._upload_to_fs_path)
    )
    assert kept == ["1", "1"]
    staging, stored = tmp_path / "repaired" / "staging", tmp_path / "repaired" / "storage"
    upload_state_last(storage._upload_to_fs_path)(
        local_path=str(staging), fs=pyarrow.fs.LocalFileSystem(), fs_path=str(stored)
    )
    assert [(stored / name).read_text() for name in STATE_FILES] == ["2", "2"]  # the next one lands whole
    assert (
        sorted(p.name for p in stored.iterdir() if p.name.startswith(".")) == []
    )  # the killed upload's temporary is gone


def _result(folder, index: int) -> _TrainingResult:
    path = folder / f"checkpoint_{index:06d}"
    path.mkdir()
    (path / "state.pt").write_bytes(b"x")
    checkpoint = tune.Checkpoint(str(path), filesystem=pyarrow.fs.LocalFileSystem())
    return _TrainingResult(checkpoint=checkpoint, metrics={"epoch": index + 1})


def _manager_resumed_after_pruning(folder):
    """A manager keeping 2, as a snapshot left it: it lists checkpoints 0 and 1, but the killed
    driver had pruned 0 after that snapshot."""
    folder.mkdir()
    manager = checkpoint_manager._CheckpointManager(tune.CheckpointConfig(num_to_keep=2))
    for index in (0, 1):
        manager.register_checkpoint(_result(folder, index))
    (folder / "checkpoint_000000" / "state.pt").unlink()
    (folder / "checkpoint_000000").rmdir()
    return manager


def test_pruning_a_checkpoint_already_gone_goes_on(tmp_path, monkeypatch):
    ray_delete = checkpoint_manager._delete_fs_path
    with pytest.raises(FileNotFoundError):  # Ray's own, as CI hit it
        _manager_resumed_after_pruning(tmp_path / "ray").register_checkpoint(_result(tmp_path / "ray", 2))
    monkeypatch.setattr(checkpoint_manager, "_delete_fs_path", delete_unless_gone(ray_delete))
    folder = tmp_path / "repaired"
    manager = _manager_resumed_after_pruning(folder)
    manager.register_checkpoint(_result(folder, 2))  # prunes the missing 0: nothing to do
    manager.register_checkpoint(_result(folder, 3))  # prunes 1, still there: deleted as before
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint_000002", "checkpoint_000003"]
    assert [r.metrics["epoch"] for r in manager.best_checkpoint_results] == [3, 4]


def test_the_callback_installs_each_repair_once():
    for _ in range(2):
        ResumableSnapshot().setup(stop=None, num_samples=1, total_num_samples=1)
    for wrapped in (
        TuneController.save_to_dir,
        checkpoint_manager._delete_fs_path,
        storage._upload_to_fs_path,
    ):
        assert hasattr(wrapped, "wraps") and not hasattr(wrapped.wraps, "wraps")  # wrapped once
