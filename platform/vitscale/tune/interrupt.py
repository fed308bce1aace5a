"""Ctrl-C and SIGTERM stop a study gracefully, and the record says so.

Tune stops its loop on SIGINT or SIGUSR1 (the handler `tune.run` installs), takes a last
snapshot of the experiment and returns as if the study had ended; left alone the driver would
then summarise a partial study as finished (exit 0, "7 finished" of 18) and SIGTERM would end in
Ray's C++ abort (exit 134). `graceful()` wraps `Tuner.fit`: the first SIGINT or SIGTERM is noted
and handed to Tune as SIGUSR1 (its graceful stop), a second one ends the driver at once, and on
the way out the caller learns which signal stopped it (`Stop.signal`) so that it can mark the
unfinished trials and the parent run KILLED and raise StudyInterrupted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from vitscale.errors import StudyInterrupted
from vitscale.tracking import store
from vitscale.tune import storage
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
    raise StudyInterrupted(
        f"{execution.spec.name}: interrupted ({stop.name}); Tune saved its state and unfinished trials are "
        f"KILLED: continue with `{command}`",
        stop.signal or signal.SIGINT,
    )


def fit(tuner, execution, flush: Callable[[], Any]) -> tuple[Any, Any]:
    """(`tuner.fit()`'s results, `flush()`'s value): the fit within `graceful()`, then `flush`
    (send the write queue) whether it ended or was stopped; a stop is recorded and raised."""
    with graceful() as stop:
        try:
            results = tuner.fit()
        except KeyboardInterrupt:
            if stop.signal is None:
                raise
        finally:
            flushed = flush()
    if stop.signal is not None:
        record_interrupt(execution, stop)
    return results, flushed
