"""The filesystem Tune reads and writes execution folders through: the local one, with the state
files Tune unpickles signed as the driver writes them and verified as it reads them back.

Signed before visible: a state file is kept in memory until closed, its digest goes into the
folder's record (`tune.state_digest.Record`), and only then is it written under a temporary name
and renamed into place. Every version that ever appears in the folder is therefore in the record,
however the driver dies. Reads of state files are checked against the record again (after
`state_digest.verify_folder` checked the whole folder before Tune started), so a file swapped in
between is refused too. Everything else (checkpoints, logs, results) passes straight through.
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path, PurePosixPath

import pyarrow as pa
import pyarrow.fs as pafs

from vitscale import storage_errors
from vitscale.tune.state_digest import (
    PARTIAL,
    Record,
    execution_root,
    is_state_file,
    load_key,
    refusal,
    vouch,
)


class _SignedWrite(io.RawIOBase):
    """A state file being written: kept in memory; on close signed, then written and renamed."""

    def __init__(self, path: Path, record: Record, relative: str) -> None:
        super().__init__()
        self.target, self.record, self.relative = path, record, relative
        self.buffer = io.BytesIO()

    def writable(self) -> bool:
        return True

    def write(self, data) -> int:
        return self.buffer.write(data)

    def close(self) -> None:
        if self.closed:
            return
        tmp = self.target.with_name(f"{PARTIAL}{self.target.name}.{secrets.token_hex(4)}")
        try:
            data = self.buffer.getvalue()
            self.record.add(self.relative, data)  # before the bytes can be seen under their name
            vouch(data)
            with open(tmp, "wb") as fh:
                fh.write(data)
            os.replace(tmp, self.target)
        except OSError as exc:  # a full disk: the last good version stays in place
            tmp.unlink(missing_ok=True)
            failure = storage_errors.classify(exc, str(self.target))
            if failure is not None:
                storage_errors.report(failure)  # the study driver stops the study
            raise
        finally:
            super().close()  # once, even when the write failed: never retried half-way


class SigningHandler(pafs.FileSystemHandler):
    """The local filesystem, with state files signed as the driver writes them and verified as it
    reads them. Its pickled copies (on trial workers, inside tuner.pkl) only pass through: the key
    never leaves the driver."""

    def __init__(self, signing: bool = True) -> None:
        self.local = pafs.LocalFileSystem()
        self.signing = signing
        self._key: bytes | None = None

    def __reduce__(self):
        return SigningHandler, (False,)

    def __eq__(self, other) -> bool:
        return isinstance(other, SigningHandler)

    def __hash__(self) -> int:
        return hash(SigningHandler)

    def _state(self, path: str) -> tuple[Record, str] | None:
        """(record, path in the execution) for a state file the driver writes or reads, else None."""
        if not self.signing:
            return None
        full = Path(path)
        root = execution_root(full)
        if root is None:
            return None
        relative = full.relative_to(root).as_posix()
        if not is_state_file(PurePosixPath(relative)):
            return None
        if self._key is None:
            self._key = load_key()
        return Record(root, self._key), relative

    # -- writes: state files signed before they are visible -----------------------------------
    def open_output_stream(self, path, metadata):
        state = self._state(path)
        if state is None:
            return self.local.open_output_stream(path, metadata=metadata)
        return pa.PythonFile(_SignedWrite(Path(path), *state), mode="w")

    def _sign_existing(self, src: str, dest: str) -> None:
        state = self._state(dest)
        if state is not None:
            data = Path(src).read_bytes()
            state[0].add(state[1], data)
            vouch(data)

    def move(self, src, dest):
        self._sign_existing(src, dest)
        self.local.move(src, dest)

    def copy_file(self, src, dest):
        self._sign_existing(src, dest)
        self.local.copy_file(src, dest)

    # -- reads: state files checked again as Tune reads them ----------------------------------
    def _verified(self, path: str):
        state = self._state(path)
        if state is None:
            return None
        data = Path(path).read_bytes()
        record, relative = state
        if not record.matches(relative, data):
            raise refusal(Path(path), record.root, recorded=record.path.is_file())
        vouch(data)  # its copy in Tune's staging folder is read back with state_digest.read_verified
        return pa.BufferReader(data)

    def open_input_stream(self, path):
        verified = self._verified(path)
        return self.local.open_input_stream(path) if verified is None else verified

    def open_input_file(self, path):
        verified = self._verified(path)
        return self.local.open_input_file(path) if verified is None else verified

    # -- everything else: the local filesystem ---------------------------------------------------
    def get_type_name(self) -> str:
        return "vitscale-signed-local"

    def normalize_path(self, path):
        return self.local.normalize_path(path)

    def get_file_info(self, paths):
        return self.local.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.local.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.local.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.local.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.local.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise OSError("vitscale's storage filesystem does not empty the root folder")

    def delete_file(self, path):
        self.local.delete_file(path)

    def open_append_stream(self, path, metadata):
        return self.local.open_append_stream(path, metadata=metadata)


def filesystem() -> pafs.PyFileSystem:
    """The storage filesystem for Tune: RunConfig(storage_filesystem=...), Tuner.restore(...)."""
    return pafs.PyFileSystem(SigningHandler())
