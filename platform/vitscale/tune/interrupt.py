"""Ctrl-C and SIGTERM stop a study gracefully, and the record says so.

Tune stops its loop on SIGINT or SIGUSR1 (the handler `tune.run` installs), takes a last
snapshot of the experiment and returns as if the study had ended; left alone the driver would
then summarise a partial study as finished (exit 0, "7 finished" of 18) and SIGTERM would end in
Ray's C++ abort (exit 134). `graceful()` wraps `Tuner.fit`: the first SIGINT or SIGTERM is noted
and handed to Tune as SIGUSR1 (its graceful stop), a second one ends the driver at once, and on
the way out the caller learns which signal stopped it (`Stop.signal`) so that it can mark the
unfinished trials and the parent run KILLED and raise StudyInterrupted.

A storage failure met while the study runs (`vitscale.storage_errors`: the disk of the execution
folder or of the MLflow store full, or read-only) stops the study the same graceful way, without
a signal. Why stop rather than wait: nothing heals a full disk but the user, and meanwhile every
trial's checkpoint and every snapshot of Tune fails (each failed trial burns a retry); stopped at
once, the last good snapshot, the last good checkpoints and the write queue's journal are what
`study resume` continues from once space is freed. A locked SQLite store is transient (another
writer finishes): the write queue waits for it and the study goes on.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from vitscale import storage_errors
from vitscale.errors import StudyInterrupted, UserError
from vitscale.tracking import store
from vitscale.tune import progress_line, storage
from vitscale.tune.summary import close_orphans

# Tune reads this when `fit` starts: with it set, Tune leaves SIGINT to us (we hand it SIGUSR1).
TUNE_SIGINT_SWITCH = "TUNE_DISABLE_SIGINT_HANDLER"
CAUGHT = (signal.SIGINT, signal.SIGTERM)
TUNE_STOP = signal.SIGUSR1
TUNE_LOGGER = "ray.tune.tune"
# Tune's own words for a stop, replaced by ours: its "Resume experiment with: Tuner.restore(...)"
# names an API a vitscale user does not call (resume is `vitscale study resume`).
TUNE_STOP_MESSAGES = ("Stop signal received", "Experiment has been interrupted")


def _not_tunes_stop_message(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith(TUNE_STOP_MESSAGES)


@dataclass
class Stop:
    signal: int | None = None  # the signal that stopped the study, None while it runs
    storage: storage_errors.StorageFailure | None = None  # or the storage failure that did

    @property
    def name(self) -> str:
        return signal.Signals(self.signal).name if self.signal else ""


def _tune_is_listening() -> bool:
    """True while `Tuner.fit` runs: Tune's own handler is on SIGUSR1 (else SIGUSR1 would kill us)."""
    return callable(signal.getsignal(TUNE_STOP))


@contextlib.contextmanager
def graceful():
    """Within: SIGINT/SIGTERM stop Tune gracefully (once) and are recorded in the yielded Stop."""
    stop = Stop()
    previous = {sig: signal.getsignal(sig) for sig in CAUGHT}
    switch = os.environ.get(TUNE_SIGINT_SWITCH)

    def handler(number: int, _frame) -> None:
        if stop.signal is not None:  # the second signal: stop now, as Tune's own message promises
            raise KeyboardInterrupt
        stop.signal = number
        print(
            f"\n{signal.Signals(number).name}: stopping after Tune saves the study's state "
            "(again to stop at once)",
            flush=True,
        )
        if _tune_is_listening():
            os.kill(os.getpid(), TUNE_STOP)
        else:
            raise KeyboardInterrupt

    os.environ[TUNE_SIGINT_SWITCH] = "1"
    for sig in CAUGHT:
        signal.signal(sig, handler)
    tune_logger = logging.getLogger(TUNE_LOGGER)
    tune_logger.addFilter(_not_tunes_stop_message)
    try:
        yield stop
    finally:
        tune_logger.removeFilter(_not_tunes_stop_message)
        for sig, old in previous.items():
            signal.signal(sig, old)
        if switch is None:
            os.environ.pop(TUNE_SIGINT_SWITCH, None)
        else:
            os.environ[TUNE_SIGINT_SWITCH] = switch


def resume_command(execution) -> str:
    """`vitscale study resume NAME`, or the execution folder where NAME alone would not find it."""
    default_root = storage.resolve("ray_results")
    target = (
        execution.spec.name
        if Path(execution.directory).parent.parent == default_root
        else execution.directory
    )
    return f"vitscale study resume {target}"


def record_interrupt(execution, stop: Stop) -> NoReturn:
    """After Tune stopped on a signal: every child run still RUNNING becomes KILLED, the parent
    KILLED (a reader never takes a stopped study for a finished one), then StudyInterrupted."""
    command = resume_command(execution)
    client = store.client_for(execution.tracking_uri)
    close_orphans(
        client,
        execution,
        set(),
        reason=f"interrupted ({stop.name}) before it finished; `{command}` reruns it",
    )
    client.set_terminated(execution.parent_run_id, "KILLED")
    progress_line.mark(execution.directory, "killed")
    raise StudyInterrupted(
        f"{execution.spec.name}: interrupted ({stop.name}); Tune saved its state and unfinished trials are "
        f"KILLED: continue with `{command}`",
        stop.signal or signal.SIGINT,
    )


def _stop_for_storage(stop: Stop, failure: storage_errors.StorageFailure) -> None:
    """A storage failure reported while Tune runs (from any thread): Tune's graceful stop, once."""
    if failure.transient or stop.storage is not None or stop.signal is not None:
        return
    stop.storage = failure
    if _tune_is_listening():
        os.kill(os.getpid(), TUNE_STOP)


def record_storage_failure(execution, stop: Stop) -> NoReturn:
    """One line: what could not be written, the fix, and how to go on. MLflow is not written to
    (its store may be the full disk): the resume marks the runs."""
    raise UserError(
        f"{stop.storage.line()}; the study stopped at its last good state: then "
        f"`{resume_command(execution)}` continues it"
    )


def fit(tuner, execution, flush: Callable[[], Any]) -> tuple[Any, Any]:
    """(`tuner.fit()`'s results, `flush()`'s value): the fit within `graceful()`, then `flush`
    (send the write queue) whether it ended or was stopped; a stop (a signal, a storage failure)
    is recorded and raised."""
    results = None
    with (
        graceful() as stop,
        storage_errors.listen(functools.partial(_stop_for_storage, stop)),
        storage_errors.quiet_logs(),
    ):
        try:
            results = tuner.fit()
        except KeyboardInterrupt:
            if stop.signal is None:
                raise
        except Exception as exc:  # Tune's own error, raised for a write that failed
            failure = stop.storage or storage_errors.classify(exc) or storage_errors.classify_text(str(exc))
            if failure is None or failure.transient:
                raise
            stop.storage = failure
        finally:
            flushed = flush()
    if stop.storage is not None:
        record_storage_failure(execution, stop)
    if stop.signal is not None:
        record_interrupt(execution, stop)
    return results, flushed
