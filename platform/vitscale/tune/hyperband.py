"""HyperBand that stops trials in a study of a few points: Ray Tune's `HyperBandScheduler` with
Li et al.'s bracket order and halvings counted on the trials a rung holds.

Ray's scheduler, as shipped (2.60), stops nothing in a small study, for three reasons:

- it fills a band's brackets from the one that never halves (s = 0: its trials all run to max_t)
  up to the most aggressive, so with max_t 4 and reduction_factor 2 the first 3 points of every
  band go to the end; Li et al. (2018, Algorithm 1) run s = s_max first. Here too.
- a rung keeps ceil(n0 / eta) of the trials the bracket was *made* for, however few it holds:
  a bracket that got 2 of its 4 trials (the search ran out of points, or `max_concurrent_trials`
  held the rest back: a paused trial still counts as running for Tune's ConcurrencyLimiter)
  keeps both. Here a rung keeps ceil(trials in it / eta).
- a bracket is "filled" when its *live* trials reach the size its last halving left, so trials
  arriving after a halving, or after others ended, keep joining it at its current milestone (all
  4 points of a lazily created study went to the s = 0 bracket). Here a bracket takes n0 trials.

And its last rung ends at max_t (Ray's ends at r0 * eta^s, e.g. epoch 3 for max_t 4, eta 3).

Ray processes a rung assuming the reporting trial is the only one RUNNING; a trial whose pause is
still in flight breaks that, and ends PAUSED where no one will ever choose it (the study then
waits forever with nothing running: seen in CI). `resume_or_stop_paused` (asked every step)
settles each paused trial: stopped when its bracket dropped it or is finished, queued to run when
its bracket has it below the milestone.
"""

from __future__ import annotations

import numpy as np
from ray.tune.experiment import Trial
from ray.tune.schedulers import HyperBandScheduler
from ray.tune.schedulers.hyperband import _Bracket


class _RungBracket(_Bracket):
    """One bracket: n0 trials at most, each rung keeping 1/eta of the trials it holds."""

    def filled(self) -> bool:
        return len(self._all_trials) >= self._n0

    def successive_halving(self, metric: str, metric_op: float):
        self._halves -= 1
        self._n = int(np.ceil(len(self._live_trials) / self._eta))
        self._r = self._max_t_attr if self._halves == 0 else int(min(self._r * self._eta, self._max_t_attr))
        self._cumul_r = self._r
        ranked = sorted(self._live_trials, key=lambda t: metric_op * self._live_trials[t][metric])
        return ranked[-self._n :], ranked[: -self._n]


class HyperBand(HyperBandScheduler):
    """`HyperBandScheduler` whose band starts with its most aggressive bracket (see the module)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        top = self._s_max_1 - 1
        n0, r0 = self._get_n0, self._get_r0  # Ray's, of the number of halvings s
        # Ray numbers a band's brackets 0, 1, ... in the order it makes them: bracket i halves top - i times
        self._get_n0 = lambda i: n0(top - i)
        self._get_r0 = lambda i: r0(top - i)

    def _create_bracket(self, s: int) -> _Bracket:
        return _RungBracket(
            time_attr=self._time_attr,
            max_trials=self._get_n0(s),
            init_t_attr=self._get_r0(s),
            max_t_attr=self._max_t_attr,
            eta=self._eta,
            s=self._s_max_1 - 1 - s,
            stop_last_trials=self._stop_last_trials,
        )

    def resume_or_stop_paused(self, tune_controller) -> None:
        """A PAUSED trial nothing would choose: stop it (its bracket dropped it or reached max_t)
        or let it run (its bracket has it below the milestone)."""
        for trial, (bracket, _) in list(self._trial_info.items()):
            if trial.status != Trial.PAUSED:
                continue
            if trial not in bracket.current_trials() or bracket.finished():
                bracket.cleanup_trial(trial)
                tune_controller.stop_trial(trial)
            elif bracket.continue_trial(trial):
                bracket.trials_to_unpause.add(trial)
