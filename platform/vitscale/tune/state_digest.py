"""Execution folders verified before anything in them is unpickled.

`study resume` hands an execution folder to Ray Tune, which unpickles what it finds there:
`tuner.pkl`, the cloudpickle entries inside `experiment_state-*.json`, the searcher's state
(`searcher-state-*.pkl`, vitscale's ReplicatedSearcher with Optuna inside), `basic-variant-state-*`,
`search_gen_state-*`, `callback-states-*.pkl` and a failed trial's `error.pkl`. Unpickling runs
whatever code the bytes name: these are the "state files" (`is_state_file`).

Threat model: someone who can write the execution folder (shared cluster storage, a group-writable
results folder, an archive handed around) but cannot read the driver user's key file. They can
replace, add or delete any file in the folder, this module's record included. What they must not
get is code run as the driver.

Defence: the driver writes every state file through `tune.signed_storage.filesystem()`, the
pyarrow filesystem Tune is given for its storage (RunConfig.storage_filesystem, Tuner.restore; in
Ray 2.60 both `tuner.pkl` and the driver's staging folder, synced every snapshot, go through it).
Before a state file becomes visible there (it is written under a temporary name, then renamed into
place), its HMAC-SHA256 under the user's key goes into the folder's record
(`vitscale-state.digests`, JSON), bound to the execution and the file's path in it. So every
version of a state file that ever exists in the folder was signed first, and a driver killed at
any moment leaves nothing unsigned behind. The key (`~/.config/vitscale/state.key`, or the file
VITSCALE_STATE_KEY names; created 0600) never lives in the folder: whoever can write the folder
could otherwise forge the record. Before resume gives the
folder to Tune, `verify_folder` checks every state file against the record; a file no recorded
digest matches is refused in one line and nothing of it is unpickled. The same check runs again as
Tune reads each state file through the filesystem, which closes the gap between the two.

Not covered: anyone who can read the key or run code as the user; a state file a later Ray writes
around the storage filesystem (resume would refuse it: unsigned); a rollback to an earlier version
the driver itself wrote (its own bytes, for the same path of the same execution); deleting files or
the record (resume then refuses: a denial of service, not code). Trial checkpoints are not state
files: trials write them on any node, and vitscale loads them with torch's `weights_only`. JSON
that vitscale reads as data (vitscale-study.json, comparison.json, the tracking queue) is not either.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import os
import secrets
import threading
from pathlib import Path, PurePosixPath

from vitscale.errors import UserError
from vitscale.tune.storage import STATE_FILE

# Not *.json or *.pkl: on restore Tune copies every such file at the top of the folder into its
# staging folder and uploads it back at every snapshot, which would put back a stale record.
RECORD_FILE = "vitscale-state.digests"
KEY_ENV = "VITSCALE_STATE_KEY"  # the key file, where not ~/.config/vitscale/state.key
TRUST_ENV = "VITSCALE_TRUST_STATE"  # an execution folder the user vouches for: signed as it is
KEPT = 16  # digests kept per path: the versions a kill can leave behind, and then some
STATE_PATTERNS = ("*.pkl", "experiment_state-*.json", "basic-variant-state-*.json", "search_gen_state-*.json")
PARTIAL = ".vitscale-partial-"  # a state file being written (never a state file itself)
CONTEXT = b"vitscale-state/1"


def _not_tunes(folder: str) -> bool:
    """A folder Tune never unpickles from: trial checkpoints (loaded with torch's weights_only), W&B's,
    Ray Train's records of a multi-worker trial's runs (`tune.distributed_trial`: never read back)."""
    return folder.startswith("checkpoint_") or folder in ("wandb", "ray_train")


def is_state_file(relative: PurePosixPath) -> bool:
    """A file Tune unpickles, by its path inside an execution (see `_not_tunes` for what is not)."""
    if any(_not_tunes(part) for part in relative.parts[:-1]):
        return False
    name = relative.name
    return not name.startswith(PARTIAL) and any(fnmatch.fnmatchcase(name, p) for p in STATE_PATTERNS)


def key_path() -> Path:
    configured = os.environ.get(KEY_ENV)
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config"
    return Path(base) / "vitscale" / "state.key"


def load_key() -> bytes:
    """The user's key (made on first use, 0600). Refused when others may read or write it."""
    path = key_path()
    try:
        if not path.exists():
            _create_key(path)
        info = path.stat()
        if info.st_mode & 0o077 or info.st_uid != os.getuid():
            raise UserError(
                f"{KEY_ENV}: {path} is open to other users (mode {info.st_mode & 0o777:o}) or not yours; "
                f"`chmod 600 {path}` (anyone who can read it can forge the state of your studies)"
            )
        key = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise UserError(
            f"{KEY_ENV}: cannot use {path} as the key that signs execution state "
            f"({getattr(exc, 'strerror', None) or exc}); point {KEY_ENV} at a file only you can read"
        ) from None
    if len(key) < 32:
        raise UserError(f"{KEY_ENV}: {path} holds no usable key; delete it (a new one is made) or restore it")
    return key


def _create_key(path: Path) -> None:
    """Write the key under a temporary name, then link it into place: two drivers starting at once
    end up with one key, and nobody ever reads half a file."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, path)
        except FileExistsError:
            pass  # another driver made it first: use theirs
    finally:
        tmp.unlink(missing_ok=True)


def execution_root(path: Path) -> Path | None:
    """The execution folder holding `path`: the nearest folder above with vitscale-study.json."""
    for folder in path.parents:
        if (folder / STATE_FILE).is_file():
            return folder
    return None


class Record:
    """The digests of one execution folder's state files: {path in the folder: [HMAC hex, ...]}."""

    _locks: dict[Path, threading.Lock] = {}
    _guard = threading.Lock()
    _recorded: dict[tuple[Path, str], str] = {}  # the newest digest this process recorded per file

    def __init__(self, root: Path, key: bytes) -> None:
        self.root, self.key = root, key
        self.path = root / RECORD_FILE
        self.execution = f"{root.parent.name}/{root.name}".encode()
        with Record._guard:
            self.lock = Record._locks.setdefault(root, threading.Lock())

    def digest(self, relative: str, data: bytes) -> str:
        message = b"\0".join([CONTEXT, self.execution, relative.encode(), hashlib.sha256(data).digest()])
        return hmac.new(self.key, message, hashlib.sha256).hexdigest()

    def read(self) -> dict[str, list[str]]:
        """What the folder's record says; a missing or damaged one says nothing (all is refused)."""
        try:
            entries = json.loads(self.path.read_text()).get("digests", {})
        except (OSError, ValueError, AttributeError):
            return {}
        return {k: [d for d in v if isinstance(d, str)] for k, v in entries.items() if isinstance(v, list)}

    def add(self, relative: str, data: bytes) -> None:
        """Record `data` as a version of `relative` (atomically: a kill leaves the old record)."""
        digest = self.digest(relative, data)
        with self.lock:
            if Record._recorded.get((self.root, relative)) == digest:
                return  # unchanged since this driver's last write (Tune rewrites files every snapshot)
            entries = self.read()
            kept = entries.get(relative, [])
            if not kept or kept[-1] != digest:
                entries[relative] = [*(d for d in kept if d != digest), digest][-KEPT:]
                tmp = self.path.with_name(f"{PARTIAL}{RECORD_FILE}.{secrets.token_hex(4)}")
                try:
                    tmp.write_text(json.dumps({"version": 1, "digests": entries}, indent=0))
                    os.replace(tmp, self.path)
                except OSError:  # a full disk: the old record stays, no partial file beside it
                    tmp.unlink(missing_ok=True)
                    raise
            Record._recorded[(self.root, relative)] = digest

    def matches(self, relative: str, data: bytes, entries: dict[str, list[str]] | None = None) -> bool:
        digest = self.digest(relative, data)
        kept = (self.read() if entries is None else entries).get(relative, [])
        return any(hmac.compare_digest(digest, known) for known in kept)


def refusal(path: Path, root: Path, recorded: bool) -> UserError:
    why = (
        f"its digest matches none recorded in {RECORD_FILE} (key {key_path()})"
        if recorded
        else f"this folder has no {RECORD_FILE} (written before vitscale signed its state, or "
        "the record was deleted)"
    )
    return UserError(
        f"{path}: refusing to unpickle a file this study's driver did not write: {why}; restore the "
        f"execution folder from a copy you trust, or, if you trust it as it is (moved from another "
        f"machine or user), resume with {TRUST_ENV}={root}"
    )


def state_files(root: Path) -> list[Path]:
    found = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not _not_tunes(d))
        for name in sorted(files):
            path = Path(folder, name)
            if is_state_file(PurePosixPath(path.relative_to(root).as_posix())):
                found.append(path)
    return found


def verify_folder(root: Path) -> None:
    """Refuse (one line) the first state file under `root` that the record does not vouch for. With
    TRUST_ENV naming `root`, sign the state files as they are instead (the user vouches for them)."""
    root = root.resolve()
    record = Record(root, load_key())
    trusted = os.environ.get(TRUST_ENV)
    if trusted and Path(trusted).expanduser().resolve() == root:
        for path in state_files(root):
            record.add(path.relative_to(root).as_posix(), path.read_bytes())
        return
    entries = record.read()
    for path in state_files(root):
        relative, data = path.relative_to(root).as_posix(), path.read_bytes()
        # (A mismatch is checked once more against a fresh record: a live driver may have written
        # this version after the record was read.)
        if not record.matches(relative, data, entries) and not record.matches(relative, data):
            raise refusal(path, root, recorded=bool(entries))


_vouched: set[bytes] = set()  # SHA-256 of the state this process wrote itself or verified


def vouch(data: bytes) -> None:
    """`data` is state this driver wrote, or read and verified: `read_verified` accepts it anywhere
    (Tune's staging copies of verified files live outside any execution's record)."""
    _vouched.add(hashlib.sha256(data).digest())


def read_verified(path: Path) -> bytes:
    """The bytes of a state file, refused unless this process wrote or verified exactly these bytes,
    or the record of the execution holding `path` vouches for them."""
    data = path.read_bytes()
    if hashlib.sha256(data).digest() in _vouched:
        return data
    root = execution_root(path.resolve())
    if root is None or not (root / RECORD_FILE).is_file():
        raise refusal(path, root or path.parent, recorded=False)
    if not Record(root, load_key()).matches(path.resolve().relative_to(root).as_posix(), data):
        raise refusal(path, root, recorded=True)
    return data
