"""Exceptions shared across vitscale.

`UserError` is anything the user can fix (a spec key, a path, a flag, an unreachable
service): the CLI prints its message as one line and exits with code 2. Everything else
is a bug and keeps its traceback. `TrialFailure` subclasses end one trial, never a study;
`DataError` is both. `make_folder` turns a folder the user named that cannot be made into one.
"""

from pathlib import Path

# The failure reason of a trial or a benchmark configuration that ran out of memory (MLflow tag
# vitscale.failure_reason, a bench record's status).
OUT_OF_MEMORY = "out_of_memory"


def is_out_of_memory(reason: str | None) -> bool:
    """True for a failure reason `out_of_memory`, optionally `: detail`."""
    return (reason or "").partition(":")[0].strip() == OUT_OF_MEMORY


class UserError(Exception):
    """A mistake the user can fix; the message names the key or path and the fix."""


def make_folder(path: Path, key: str, new: bool = False) -> None:
    """`mkdir -p path`, or a UserError naming `key` (the flag or study key that gave the path) and
    why: a folder the user named that cannot be made is bad input, not a traceback. `new`: the
    folder itself must not exist yet (an atomic claim; FileExistsError goes to the caller)."""
    try:
        path.mkdir(parents=True, exist_ok=not new)
    except OSError as exc:
        if new and isinstance(exc, FileExistsError):
            raise
        raise UserError(
            f"{key}: cannot create {path} ({exc.strerror or exc}); pass a writable folder"
        ) from None


class TrialFailure(Exception):
    """One trial cannot go on; recorded as FAILED with `reason`, the study continues."""

    reason = "failed"


class SolverError(TrialFailure):
    """The ODE solver gave up (step size underflow, too many steps)."""

    reason = "solver_error"


class TrialDiverged(TrialFailure):
    """The training loss became NaN or infinite."""

    reason = "diverged"


class DataError(UserError, TrialFailure):
    """A data set on disk cannot be read: missing, truncated, corrupt, or not in the expected layout.

    Outside a study it is a UserError (one line naming the path, exit 2); inside a study it ends
    the trial as FAILED with reason `data_error` (a retry would read the same bytes).
    """

    reason = "data_error"


class TrialOutOfMemory(TrialFailure):
    """The trial's device ran out of memory."""

    reason = OUT_OF_MEMORY


class TeacherMismatch(UserError, TrialFailure):
    """A distillation teacher (`train.distill.teacher`) cannot guide this student: different
    width, token grid, prefix tokens or depth, or a teacher that cannot be found or read.

    From `vitscale train` a UserError (one line naming both configs, exit 2); in a study the
    trial ends FAILED with reason `teacher_mismatch` (every retry would load the same teacher).
    """

    reason = "teacher_mismatch"


class StudyInterrupted(Exception):
    """Ctrl-C (SIGINT) or SIGTERM stopped a study gracefully: Tune saved its state, unfinished
    trials are KILLED, and `vitscale study resume` continues it. The CLI prints the message and
    exits 128 + the signal number (130, 143), as a shell reports a process the signal ended."""

    def __init__(self, message: str, signal_number: int) -> None:
        super().__init__(message)
        self.exit_code = 128 + signal_number
