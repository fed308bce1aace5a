"""Execution folders verified before unpickling (tune.state_digest): what the driver writes through
its storage filesystem is signed before it is visible, what it did not write is refused in one
line before anything of it is unpickled, and the key never travels with the folder."""

from __future__ import annotations

import json
import os
import pickle
import stat
from pathlib import Path, PurePosixPath

import pyarrow.fs as pafs
import pytest

from vitscale.errors import UserError
from vitscale.tune import signed_storage, state_digest
from vitscale.tune.replicates import ReplicatedSearcher
from vitscale.tune.storage import STATE_FILE


@pytest.fixture(autouse=True)
def key_file(tmp_path, monkeypatch):
    """Each test its own key, outside the folders it signs (as ~/.config/vitscale/state.key is)."""
    path = tmp_path / "config" / "state.key"
    monkeypatch.setenv(state_digest.KEY_ENV, str(path))
    monkeypatch.delenv(state_digest.TRUST_ENV, raising=False)
    return path


@pytest.fixture
def execution(tmp_path) -> Path:
    folder = tmp_path / "results" / "study" / "20260101-000000"
    folder.mkdir(parents=True)
    (folder / STATE_FILE).write_text("{}")
    return folder


class Payload:
    """What an attacker plants: unpickling it runs code (here: it writes a marker file)."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "the payload ran"))


def write(fs: pafs.FileSystem, path: Path, data: bytes) -> None:
    with fs.open_output_stream(str(path)) as out:
        out.write(data)


def test_state_files_are_what_tune_unpickles_and_not_trial_checkpoints():
    for name in ("tuner.pkl", "searcher-state-2026.pkl", "experiment_state-2026.json", "t1/error.pkl",
                 "t1/params.pkl", "basic-variant-state-x.json", "search_gen_state-x.json", "tune-0/tuner.pkl"):  # fmt: skip
        assert state_digest.is_state_file(PurePosixPath(name)), name
    for name in ("vitscale-study.json", "comparison.json", "t1/result.json", "t1/checkpoint_000001/state.pkl", "wandb/run-1/x.pkl",
                 "tracking-queue/cursor.json", f"{state_digest.PARTIAL}tuner.pkl.1a2b"):  # fmt: skip
        assert not state_digest.is_state_file(PurePosixPath(name)), name


def test_what_the_driver_writes_through_the_filesystem_verifies_and_a_planted_file_is_refused(
    execution, tmp_path
):
    fs = signed_storage.filesystem()
    write(fs, execution / "tuner.pkl", pickle.dumps({"tuner": 1}))
    staging = tmp_path / "staging"  # Tune's driver staging folder, synced up with copy_files
    (staging / "t1").mkdir(parents=True)
    (staging / "experiment_state-x.json").write_text('{"trial_data": []}')
    (staging / "t1" / "params.pkl").write_bytes(pickle.dumps({"seed": 0}))
    (staging / "t1" / "result.json").write_text("{}")
    pafs.copy_files(str(staging), str(execution), destination_filesystem=fs)
    record = json.loads((execution / state_digest.RECORD_FILE).read_text())["digests"]
    assert sorted(record) == ["experiment_state-x.json", "t1/params.pkl", "tuner.pkl"]
    state_digest.verify_folder(execution)
    with fs.open_input_file(str(execution / "tuner.pkl")) as f:
        assert pickle.loads(f.readall()) == {"tuner": 1}

    marker = tmp_path / "pwned"
    (execution / "searcher-state-2026.pkl").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UserError) as refused:
        state_digest.verify_folder(execution)
    line = str(refused.value)
    assert "\n" not in line and line.startswith(
        f"{execution / 'searcher-state-2026.pkl'}: refusing to unpickle"
    )
    assert f"{state_digest.TRUST_ENV}={execution}" in line
    with pytest.raises(UserError, match="refusing to unpickle"):  # Tune reading it: checked again
        fs.open_input_stream(str(execution / "searcher-state-2026.pkl"))
    assert not marker.exists()


def test_a_planted_searcher_pickle_is_refused_and_its_payload_does_not_run(execution, tmp_path):
    searcher = ReplicatedSearcher(_Inner(), seeds=[0, 1], metrics=["val_top1"], modes=["max"])
    fs = signed_storage.filesystem()
    staging = tmp_path / "staging"
    staging.mkdir()
    searcher.save(str(staging / "searcher-state-a.pkl"))
    pafs.copy_files(str(staging), str(execution), destination_filesystem=fs)
    restored = ReplicatedSearcher(_Inner(), seeds=[9], metrics=["val_top1"], modes=["max"])
    restored.restore(str(execution / "searcher-state-a.pkl"))  # signed on its way: restores
    assert restored.seeds == [0, 1]

    marker = tmp_path / "pwned"
    (execution / "searcher-state-a.pkl").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UserError, match=r"searcher-state-a\.pkl: refusing to unpickle"):
        restored.restore(str(execution / "searcher-state-a.pkl"))
    with pytest.raises(UserError, match=r"searcher-state-a\.pkl: refusing to unpickle"):
        state_digest.verify_folder(execution)
    assert not marker.exists()


def test_tunes_restore_copy_of_the_folder_never_puts_back_a_stale_record(execution, tmp_path):
    """On restore Tune downloads every top-level *.json / *.pkl of the folder into its staging folder
    and uploads the staging folder at every snapshot: the record must not be among them, or each
    snapshot would replace it with the copy from restore time (a resumed study then refused)."""
    from ray.train._internal.storage import _download_from_fs_path, _list_at_fs_path, _upload_to_fs_path

    fs = signed_storage.filesystem()
    write(fs, execution / "tuner.pkl", b"first session")
    staging = tmp_path / "staging"
    for name in _list_at_fs_path(fs, str(execution)):  # as _ExperimentCheckpointManager.sync_down
        if name.endswith((".json", ".pkl")):
            _download_from_fs_path(fs, str(execution / name), str(staging / name))
    (staging / "searcher-state-resumed.pkl").write_bytes(b"written by the resumed driver")
    _upload_to_fs_path(str(staging), fs, str(execution))  # a snapshot of the resumed driver
    _upload_to_fs_path(str(staging), fs, str(execution))  # and the next one
    state_digest.verify_folder(execution)
    assert state_digest.RECORD_FILE not in {p.name for p in staging.iterdir()}


def test_the_searcher_restores_from_tunes_staging_copy_only_what_was_verified_on_the_way(
    execution, tmp_path, monkeypatch
):
    """A resumed driver: Tune copies the folder's top-level state (vitscale-study.json included)
    into its staging folder through the filesystem, then restores the searcher from there."""
    from ray.train._internal.storage import _download_from_fs_path

    staging = tmp_path / "first-driver-staging"
    staging.mkdir()
    ReplicatedSearcher(_Inner(), seeds=[0, 1], metrics=["m"], modes=["max"]).save(
        str(staging / "searcher-state-a.pkl")
    )
    pafs.copy_files(str(staging), str(execution), destination_filesystem=signed_storage.filesystem())
    monkeypatch.setattr(state_digest, "_vouched", set())  # a new process: it vouches for nothing yet

    resumed = tmp_path / "resumed-driver-staging"
    for name in ("searcher-state-a.pkl", STATE_FILE):
        _download_from_fs_path(signed_storage.filesystem(), str(execution / name), str(resumed / name))
    searcher = ReplicatedSearcher(_Inner(), seeds=[9], metrics=["m"], modes=["max"])
    searcher.restore(str(resumed / "searcher-state-a.pkl"))
    assert searcher.seeds == [0, 1]
    marker = tmp_path / "pwned"
    (resumed / "searcher-state-a.pkl").write_bytes(pickle.dumps(Payload(marker)))  # in the staging copy
    with pytest.raises(UserError, match="refusing to unpickle"):
        searcher.restore(str(resumed / "searcher-state-a.pkl"))
    assert not marker.exists()


def test_a_record_forged_without_the_key_or_missing_is_refused(execution, key_file, tmp_path):
    (execution / "tuner.pkl").write_bytes(pickle.dumps(Payload(tmp_path / "pwned")))
    with pytest.raises(UserError, match=f"this folder has no {state_digest.RECORD_FILE}"):
        state_digest.verify_folder(execution)
    forger = state_digest.Record(execution, os.urandom(32))  # the attacker's own key
    forger.add("tuner.pkl", (execution / "tuner.pkl").read_bytes())
    with pytest.raises(UserError, match="its digest matches none recorded"):
        state_digest.verify_folder(execution)
    assert not (tmp_path / "pwned").exists()


def test_trusting_a_folder_signs_it_as_it_is(execution, monkeypatch):
    (execution / "tuner.pkl").write_bytes(pickle.dumps({"moved": "from another machine"}))
    monkeypatch.setenv(state_digest.TRUST_ENV, str(execution / ".." / execution.name))
    state_digest.verify_folder(execution)
    monkeypatch.delenv(state_digest.TRUST_ENV)
    state_digest.verify_folder(execution)  # signed now


def test_a_file_is_signed_before_it_is_visible_and_a_kill_mid_write_leaves_only_a_partial(
    execution, monkeypatch
):
    fs = signed_storage.filesystem()
    seen = []
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst).name == "tuner.pkl":  # the moment the file appears under its name
            record = state_digest.Record(execution, state_digest.load_key())
            seen.append(record.matches("tuner.pkl", Path(src).read_bytes()))
            raise KeyboardInterrupt  # the driver dies right here
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(KeyboardInterrupt):
        write(fs, execution / "tuner.pkl", b"state")
    assert seen == [True]
    monkeypatch.setattr(os, "replace", real_replace)
    assert not (execution / "tuner.pkl").exists()
    state_digest.verify_folder(execution)  # a partial is not a state file: nothing to refuse


def test_the_key_is_private_and_never_travels_with_the_filesystem(key_file, execution):
    fs = signed_storage.filesystem()
    write(fs, execution / "tuner.pkl", b"state")  # makes the key
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    key_hex = key_file.read_text().strip()
    copy = pickle.loads(pickle.dumps(fs))  # what trial workers and tuner.pkl get
    assert key_hex.encode() not in pickle.dumps(fs) and not copy.handler.signing
    write(copy, execution / "t1.pkl", b"unsigned")  # a worker's copy signs nothing
    assert "t1.pkl" not in json.loads((execution / state_digest.RECORD_FILE).read_text())["digests"]
    key_file.chmod(0o644)
    with pytest.raises(UserError, match="chmod 600"):
        state_digest.verify_folder(execution)


class _Inner:
    """The smallest inner searcher ReplicatedSearcher pickles along."""

    def set_search_properties(self, *args, **kwargs):
        return True


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_resume_by_folder_from_elsewhere_works_and_a_planted_searcher_pickle_is_refused(tmp_path):
    """A TPE study run in one directory with the default relative sqlite:///mlflow.db; resumed by its
    folder from another directory (the record keeps the store's absolute path, the signed state
    verifies); then a `__reduce__` payload planted in its searcher pickle: one line, exit 2, the
    payload never runs and the parent run is not reopened."""
    from mlflow import MlflowClient
    from study_helpers import vitscale, write_study

    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    here.mkdir()
    elsewhere.mkdir()
    study = write_study(here, "signed-tpe", space={"train.lr": {"loguniform": [1.0e-3, 1.0e-2]}},
                        search={"algorithm": "tpe", "num_samples": 1, "seeds": [0]})  # fmt: skip
    # The CLI inherits the fixture's key (VITSCALE_STATE_KEY), outside every folder here.
    vitscale("study", "run", str(study), "--tracking-uri", "sqlite:///mlflow.db", "--num-cpus", "1", cwd=here)
    [folder] = list((here / "ray_results" / "signed-tpe").glob("2*"))
    record = json.loads((folder / STATE_FILE).read_text())
    assert record["tracking_uri"] == f"sqlite:///{here / 'mlflow.db'}"
    [searcher_state] = list(folder.glob("searcher-state-*.pkl"))

    resumed = vitscale("study", "resume", str(folder), "--num-cpus", "1", cwd=elsewhere)
    assert "1 trials — 1 finished" in resumed.stdout, resumed.stdout[-2000:]  # the plan, nothing re-run
    assert "Failed to restore the run state" not in resumed.stderr  # Tune would start afresh
    assert not (elsewhere / "mlflow.db").exists()  # no stray store beside the user

    marker = tmp_path / "pwned"
    searcher_state.write_bytes(pickle.dumps(Payload(marker)))
    refused = vitscale("study", "resume", str(folder), "--num-cpus", "1", cwd=elsewhere, check=False)
    errors = [line for line in refused.stderr.splitlines() if line.startswith("error:")]
    assert refused.returncode == 2 and len(errors) == 1, refused.stderr[-3000:]
    assert (
        errors[0].startswith(f"error: {searcher_state}: refusing to unpickle")
        and "Traceback" not in refused.stderr
    )
    assert not marker.exists()
    parent = MlflowClient(tracking_uri=record["tracking_uri"]).get_run(record["parent_run_id"])
    assert parent.info.status == "FINISHED"
