"""`kind: simulated`: a train study whose trials train nothing (`tune.simulated_trial`), to measure
the scheduler at cluster scale (`tune.cluster_scale`).

It is the train kind in every layer (its study rules, search, MLflow description, parent run and
analysis), with its own trial function and execution mode: each Tune trial holds its worker
group's placement group itself (`tune.execution_modes.SIMULATED_WORKERS`), so a study of 1,000
multi-worker trials runs one light process per trial in flight instead of a Ray Train controller
and a process per worker. It is registered by the harness (`register_simulated_kind`), not shipped:
`kind: simulated` validates only in a process that registered it.
"""

from __future__ import annotations

import functools
from dataclasses import replace

from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.kinds import STUDY_KINDS, register_kind
from vitscale.kinds.train import TRAIN
from vitscale.study.kinds import STUDY_RULES
from vitscale.tracking.parent_summary import PARENT_RUNS
from vitscale.tune.execution_modes import SIMULATED_WORKERS
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.simulated_trial import simulated_trial

NAME = "simulated"

SIMULATED = replace(
    TRAIN,
    name=NAME,
    title="Simulated trials (the scheduler at scale)",
    analysis_steps=("aggregate_replicates", "fits_json"),
    report_sections=("configurations", "failures"),
)


def register_simulated_kind(epoch_s: float) -> None:
    """Register `kind: simulated` in every layer's table, its trials `epoch_s` seconds per epoch;
    once per process (a second call keeps the first one's epoch time)."""
    if NAME in STUDY_KINDS:
        return
    register_kind(SIMULATED)
    trial = functools.partial(simulated_trial, epoch_s=epoch_s)
    TUNE_KINDS.register(NAME, replace(TUNE_KINDS[TRAIN.name], trial=trial, execution=SIMULATED_WORKERS))
    for table in (STUDY_RULES, PARENT_RUNS, ANALYSIS_KINDS):
        table.register(NAME, table[TRAIN.name])
