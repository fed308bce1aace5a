"""How often Tune rewrites its experiment snapshot: a period that grows with the planned trials.

Why: `experiment_state-*.json` holds every trial of the experiment (~26.5 KB each) and Tune
rewrites the whole file every snapshot ("auto": every 10 s or more often), so a study's snapshot
I/O grew with trials × snapshots, quadratically in its size (7.95 MB per rewrite at 300 trials).
Here the period is SECONDS_PER_TRIAL per planned trial, within [MIN_S, MAX_S]: the bytes written
per second stay about flat as studies grow. What a longer period costs: a driver killed between
two snapshots resumes from the older one, redoing at most that long of the trials' progress
(trials restart from their checkpoints; `tune.replicates` keeps a sampler study's plan exact).

Ray 2.60 takes the period from the environment only (`TUNE_GLOBAL_CHECKPOINT_S`, read when the
fit starts, in `TuneController.__init__`), so `apply` sets it there; a value the user set wins.
Ray Client drivers (`ray://`) run the fit remotely and keep Tune's default.

Checkpoints kept (`tuner.CHECKPOINTS_KEPT`, `CheckpointConfig(num_to_keep)`): the snapshot may name
a trial checkpoint several epochs old, which must still exist on resume. Tune itself guarantees
that whatever the period: once a trial has saved `num_to_keep` checkpoints since the last
snapshot, it forces a snapshot (`_ExperimentCheckpointManager.on_trial_checkpoint`), so the one
named is always among those kept. For trials whose epochs are much shorter than the period that
forced snapshot, not the period, sets the pace (every CHECKPOINTS_KEPT epochs of the busiest trial).
Older checkpoints the snapshot lists may be gone by then (pruned after it was written); pruning them
again on resume is a no-op (`tune.resumable_snapshot`).

Population-based studies (PBT, PB2) keep Tune's 2 s: every exploit changes a member's trial state
(the checkpoint it restores, its values), and a resumed driver redoes the exploits made after the
snapshot it reads. Their populations are tens of members, so their snapshots stay cheap. (The
kill-and-resume test's lost epochs, once blamed on the period, came from populations capped by
search.max_concurrent_trials, whose members never trained together; now refused, `study.population`.)
"""

from __future__ import annotations

import os

from vitscale.study import count_trials
from vitscale.tune.scheduler_registry import scheduler_kind

ENV = "TUNE_GLOBAL_CHECKPOINT_S"
SECONDS_PER_TRIAL = 0.2  # 300 planned trials: a snapshot a minute
MIN_S = 10.0  # Tune's own floor in "auto" mode
MAX_S = 300.0  # at most five minutes of progress to redo after a kill
POPULATION_S = 2.0  # PBT / PB2: every exploit is in the snapshot a resume reads
_set_by_us: str | None = None


def period_s(planned_trials: int, population: bool = False) -> float:
    """Seconds between two snapshots of an experiment of `planned_trials` trials (`population`:
    its scheduler evolves a population, PBT or PB2)."""
    if population:
        return POPULATION_S
    return min(MAX_S, max(MIN_S, SECONDS_PER_TRIAL * planned_trials))


def apply(planned_trials: int, population: bool = False) -> None:
    """Set Tune's snapshot period for the next fit, unless the user set TUNE_GLOBAL_CHECKPOINT_S."""
    global _set_by_us
    current = os.environ.get(ENV)
    if current is not None and current != _set_by_us:
        return
    _set_by_us = f"{period_s(planned_trials, population):g}"
    os.environ[ENV] = _set_by_us


def apply_for(spec) -> None:
    """`apply` for the study `spec` about to be fitted (or resumed)."""
    apply(count_trials(spec), population=scheduler_kind(spec).population is not None)
