"""Whether a trial waits for the driver after each epoch it reports.

Ray Tune runs a function trainable's reports synchronously: after each epoch the trial blocks until
the driver has taken the result and asked for the next one, so that a scheduler can stop or pause
the trial at exactly that epoch. On the quickstart that wait was 21 ms per epoch (median; the
round trip through the driver), 5 % of the study's slot time (studies/README.md, "Overhead and
load"). A study whose scheduler never acts on a result (FIFO, and no pruning searcher) has nothing
to wait for: its trials train their next epoch while the driver takes the result. What it changes
is only when the trial learns of a stop from outside (an interrupted study, a lost driver): at its
next report, one epoch later, as a trial that was mid-epoch always did. Every result and checkpoint
is still reported, in order, each checkpoint persisted before its result leaves the trial.
"""

from __future__ import annotations

ACTING_SEARCHERS = ("bohb",)  # searchers whose pruner stops trials at reported epochs


def waits_for_driver(spec) -> bool:
    """Whether anything may stop or pause this study's trials at a reported epoch: any scheduler
    but FIFO (early stopping, PBT/PB2), or a searcher that prunes."""
    return spec.scheduler.type != "fifo" or spec.search.algorithm in ACTING_SEARCHERS


def report_without_waiting() -> None:
    """Let this trial train on once its result is taken, not once the driver asks for the next.
    Ray 2.60's function-trainable session has the switch Ray Train's workers use
    (`synchronous_result_reporting`); a Ray without it keeps its synchronous reports."""
    from ray.train._internal.session import get_session

    session = get_session()
    if session is not None and hasattr(session, "synchronous_result_reporting"):
        session.synchronous_result_reporting = False
