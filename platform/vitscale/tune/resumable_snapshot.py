"""Three repairs to Ray 2.60's experiment snapshot, so that a study driver killed at any moment
resumes: found by CI's kill-and-resume test (2026-12-04), which hung once, and reproduced here
(that test's kill, looped: of 12 kills before, 3 resumed into a hang; of 20 after, none, though 4 of
them landed mid-upload).

A snapshot is several files: the trials (`experiment_state-*.json`), the searcher's state (a grid's
`basic-variant-state-*.json`, an Optuna searcher's pickle), the callbacks'. Tune writes them to a
local staging folder, then uploads that folder in a background thread. Where the files on storage
come from two snapshots, a resumed study can hang for good: measured, a grid searcher that had
made 2 trials beside an experiment state holding 1, so it waited forever for its second trial, not
in the experiment, to free its only concurrency slot ("1/4 done · 0 running", then nothing).

1. **A snapshot written while the previous one uploads.** The next snapshot rewrites the staging
   files even while their upload still runs (`_ExperimentCheckpointManager.sync_up_experiment_state`),
   so one upload can carry files of two snapshots. `save_after_upload`: a snapshot waits for the
   upload still running before it writes.

2. **A driver killed mid-upload.** The files land one by one, so a kill between two leaves a torn
   snapshot. `upload_state_last`: a snapshot's folders go first, then its files under temporary
   names, then each is renamed into place; a kill before the renames leaves the previous snapshot
   whole. (Between two renames it would still tear: microseconds, where the upload took 0.3 s.)

3. **Pruning a checkpoint already gone.** The snapshot lists each trial's kept checkpoints; the
   killed driver went on pruning after it (`CheckpointConfig(num_to_keep)`), so the list can name
   checkpoints no longer on storage. The resumed trial's next checkpoint prunes the oldest of the
   list, and Ray's `_delete_fs_path` raises FileNotFoundError for a missing path, leaving that
   checkpoint's bookkeeping half done (`Trial.on_checkpoint`: registered, index not advanced).
   `delete_unless_gone`: a missing path is what deleting asks for, so it is skipped.

`ResumableSnapshot` installs them from `Callback.setup`, in whatever process runs the fit (the
local driver, a submitted job's driver, or the remote fit of a `ray://` client). On a Ray without
these internals nothing is changed.
"""

from __future__ import annotations

import logging
import posixpath
import secrets
from pathlib import Path

import pyarrow.fs
from ray.train._internal import checkpoint_manager, storage
from ray.tune import Callback
from ray.tune.execution.tune_controller import TuneController

from vitscale.tune.state_digest import PARTIAL

logger = logging.getLogger(__name__)
SNAPSHOT_MARK = "experiment_state-*.json"  # a folder holding one is the experiment's staging folder
UPLOADING = f"{PARTIAL}upload-"  # a snapshot file on its way (left behind by a killed driver)


def save_after_upload(save_to_dir):
    """`TuneController.save_to_dir`, run once the upload of the previous snapshot has ended."""

    def save(controller) -> None:
        syncer = getattr(getattr(controller, "_storage", None), "syncer", None)
        if syncer is not None:
            try:
                syncer.wait()
            except Exception as exc:  # Ray logs a failed upload the same way and carries on
                logger.warning("the previous upload of the experiment snapshot failed: %s", exc)
        save_to_dir(controller)

    save.wraps = save_to_dir
    return save


def upload_state_last(upload):
    """`_upload_to_fs_path(local_path, fs, fs_path, exclude)`; for a snapshot's staging folder,
    its folders first, then its files each under a temporary name, then renamed into place."""

    def upload_snapshot(local_path, fs, fs_path, exclude=None) -> None:
        folder = Path(local_path)
        if exclude or not folder.is_dir() or not any(folder.glob(SNAPSHOT_MARK)):
            upload(local_path=local_path, fs=fs, fs_path=fs_path, exclude=exclude)
            return
        _remove_stale_uploads(fs, fs_path)
        entries = sorted(folder.iterdir())
        for entry in (e for e in entries if e.is_dir()):
            upload(local_path=str(entry), fs=fs, fs_path=posixpath.join(fs_path, entry.name))
        incoming = []
        for entry in (e for e in entries if e.is_file()):
            temporary = posixpath.join(fs_path, f"{UPLOADING}{entry.name}.{secrets.token_hex(4)}")
            upload(local_path=str(entry), fs=fs, fs_path=temporary)
            incoming.append((temporary, posixpath.join(fs_path, entry.name)))
        for temporary, final in incoming:
            fs.move(temporary, final)

    upload_snapshot.wraps = upload
    return upload_snapshot


def _remove_stale_uploads(fs, fs_path: str) -> None:
    """The temporaries of an upload a killed driver left: one upload runs at a time
    (`save_after_upload`), so any there now is stale."""
    try:
        listed = fs.get_file_info(pyarrow.fs.FileSelector(fs_path, allow_not_found=True))
    except OSError:
        return
    for info in listed:
        if info.base_name.startswith(UPLOADING):
            fs.delete_file(info.path)


def delete_unless_gone(delete):
    """`delete(fs=, fs_path=)`, except that a path already missing is a no-op."""

    def delete_present(fs, fs_path) -> None:
        if fs.get_file_info(fs_path).type == pyarrow.fs.FileType.NotFound:
            logger.info("checkpoint %s is already gone: nothing to prune", fs_path)
            return
        delete(fs=fs, fs_path=fs_path)

    delete_present.wraps = delete
    return delete_present


def install() -> None:
    """The three repairs, once per process."""
    _wrap(TuneController, "save_to_dir", save_after_upload)
    _wrap(storage, "_upload_to_fs_path", upload_state_last)
    _wrap(checkpoint_manager, "_delete_fs_path", delete_unless_gone)


def _wrap(owner, name: str, wrapper) -> None:
    current = getattr(owner, name, None)
    if current is not None and not hasattr(current, "wraps"):
        setattr(owner, name, wrapper(current))


class ResumableSnapshot(Callback):
    """Installs the repairs in the process that runs the fit, before its first snapshot."""

    def setup(self, **info) -> None:
        install()
