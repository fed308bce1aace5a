"""BOHB (`search.algorithm: bohb`): Optuna's TPE proposes the points, Optuna's `HyperbandPruner`
stops them early, one pruner per arm.

BOHB (Falkner et al. 2018) is a density model of good points (TPE's kind) proposing the points that
HyperBand's brackets run. Ray Tune's own pairing (`TuneBOHB` + `HyperBandForBOHB`) needs
hpbandster (unmaintained since 2019, on the C extension netifaces) and a ConfigSpace space, which
the studies' define-by-run spaces with `when:` conditions are not; its HyperBand is synchronous:
trials pause at each rung, and a paused trial holds one of `search.max_concurrent_trials`' slots
(tune/hyperband.py). Optuna's pairing needs neither: the sampler is the study's TPE as
`tune.samplers` builds it (multivariate, conditional groups: SAMPLERS["bohb"]), and `HyperbandPruner` runs
HyperBand's brackets as asynchronous successive halving: a trial is stopped at a rung when it is
not in the top 1/reduction_factor of the trials of its bracket that reached the rung, nothing
pauses. A point stopped early reaches Optuna's RDB as PRUNED with its per-epoch values
(tune.replicates), and TPE ranks it below every finished point, those that went further first:
the model learns from every budget, as BOHB's does.

`HyperbandPruning` is the per-arm Tune scheduler (`tune.arm_asha` keeps one per arm, as for ASHA):
it asks the pruner of an in-memory Optuna study holding the arm's trials, epoch by epoch. Its
brackets are HyperBand's for max_t / grace_period epochs (`scheduler.max_t`, `grace_period`,
`reduction_factor`); a trial's bracket is a hash of its number in the arm. Like ASHA's rungs, the
brackets start empty again when a study resumes.
"""

from __future__ import annotations

import math
from typing import Any

import optuna
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

STUDY_NAME = "arm"  # the pruner hashes "<study name>_<trial number>" into brackets: fixed, so repeatable


class HyperbandPruning(FIFOScheduler):
    """Optuna's `HyperbandPruner` as a Tune scheduler: STOP when it prunes, else CONTINUE."""

    def __init__(
        self,
        time_attr: str,
        metric: str,
        mode: str,
        max_t: int,
        reduction_factor: float,
        grace_period: int = 1,
    ) -> None:
        super().__init__()
        self._time_attr, self._metric, self._max_t = time_attr, metric, max_t
        pruner = optuna.pruners.HyperbandPruner(
            min_resource=grace_period, max_resource=max_t, reduction_factor=int(reduction_factor)
        )
        self._study = optuna.create_study(
            study_name=STUDY_NAME,
            storage=optuna.storages.InMemoryStorage(),
            direction="maximize" if mode == "max" else "minimize",
            pruner=pruner,
        )
        self._trials: dict[str, optuna.trial.Trial] = {}  # Tune trial id -> its Optuna trial
        self._judged: dict[str, set[int]] = {}  # Tune trial id -> epochs reported to the pruner

    def on_trial_add(self, tune_controller, trial) -> None:
        self._trials[trial.trial_id] = self._study.ask()
        self._judged[trial.trial_id] = set()

    def on_trial_result(self, tune_controller, trial, result: dict[str, Any]) -> str:
        step, value = result.get(self._time_attr), result.get(self._metric)
        if not isinstance(value, int | float) or math.isnan(value) or step is None:
            return TrialScheduler.CONTINUE  # a failure report: the trainable ends the trial itself
        if step >= self._max_t:
            return TrialScheduler.CONTINUE  # its last epoch: nothing left to save by stopping
        if int(step) in self._judged[trial.trial_id]:
            return TrialScheduler.CONTINUE  # restarted from a checkpoint: that epoch went on before
        self._judged[trial.trial_id].add(int(step))
        optuna_trial = self._trials[trial.trial_id]
        optuna_trial.report(float(value), int(step))
        return TrialScheduler.STOP if optuna_trial.should_prune() else TrialScheduler.CONTINUE

    def _close(self, trial, state: optuna.trial.TrialState) -> None:
        optuna_trial = self._trials.pop(trial.trial_id, None)
        self._judged.pop(trial.trial_id, None)
        if optuna_trial is not None:
            self._study.tell(optuna_trial, state=state)

    def on_trial_complete(self, tune_controller, trial, result) -> None:
        self._close(trial, optuna.trial.TrialState.PRUNED)  # a value of its own would not be read

    def on_trial_error(self, tune_controller, trial) -> None:
        self._close(trial, optuna.trial.TrialState.FAIL)

    def on_trial_remove(self, tune_controller, trial) -> None:
        self._close(trial, optuna.trial.TrialState.PRUNED)

    def debug_string(self) -> str:
        return f"HyperbandPruner: {len(self._study.trials)} trials, {len(self._trials)} running"
