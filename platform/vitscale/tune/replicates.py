"""Seeds as replicates for sampler-driven studies.

A study's `search.seeds` asks for every sampled configuration to be trained once per seed, each
seed its own trial. `ReplicatedSearcher` wraps the Optuna searcher: it asks Optuna for a new point
once, hands it out with each seed in turn, and tells Optuna the mean over the replicates when the
last one has finished, so the sampler learns from seed-averaged objectives instead of noise.
With a compute budget (`tune.budget`) it draws no new point once the trials have spent it; the
seeds of the point already drawn still run. A point with a replicate the scheduler stopped before
its planned epochs (ASHA, HyperBand, median) is told PRUNED, with the per-epoch values its first
replicate reported: its last value was read at a lower budget than a finished point's, and TPE
ranks pruned points below finished ones, by how far they got; GP, NSGA-II and CMA-ES
leave them out.

Optuna's RDB is written at once, Tune's snapshot of this searcher every few seconds: a driver
killed in between leaves Optuna ahead of the state a resume restores. A point Optuna already
holds as finished is not reported or told again (Optuna refuses to update a finished trial), and
an Optuna trial asked for a Tune trial no snapshot saw is closed as FAIL, marked `abandoned`
(tests/tune/test_replicates_kill_points.py kills the driver at 10 points around a tell).
"""

from __future__ import annotations

import math
import pickle
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ray.tune.search import Searcher

from vitscale.tracking.tune_callback import RESULT_FAILURE_REASON, RESULT_PLANNED_EPOCHS, mlflow_run_id
from vitscale.tune import state_digest
from vitscale.tune.budget import ComputeBudget


@dataclass
class _Group:
    """One sampled point and its replicates."""

    inner_id: str
    point: dict[str, Any]
    seeds_left: list[int]
    number: int | None = None  # the Optuna trial's number: the `#7` of the runs' names
    trial_ids: list[str] = field(default_factory=list)
    results: dict[str, dict | None] = field(default_factory=dict)


class ReplicatedSearcher(Searcher):
    """Trial configs are `{"point": {dotted path: value}, "seed": int, "sample": int}` (sample: the
    Optuna trial number of the point, when Optuna keeps one)."""

    def __init__(
        self,
        inner: Searcher,
        seeds: list[int],
        metrics: list[str],
        modes: list[str],
        parent_run_id: str = "",
        budget: ComputeBudget | None = None,
    ) -> None:
        metric = metrics[0] if len(metrics) == 1 else metrics
        mode = modes[0] if len(modes) == 1 else modes
        super().__init__(metric=metric, mode=mode)
        self.inner = inner
        self.seeds = list(seeds)
        self.metrics = list(metrics)
        self.parent_run_id = parent_run_id
        self.budget = budget
        self._open: _Group | None = None
        self._groups: dict[str, _Group] = {}  # trial id -> its group
        self._finished_before_restore: set[int] = set()  # Optuna trial numbers (see the docstring)
        # trial id -> its last reported result: a trial HyperBand stops while it is paused completes
        # with no result of its own, and is still a point stopped early, not a failure
        self._last: dict[str, dict] = {}

    def set_search_properties(self, metric, mode, config, **spec) -> bool:
        return self.inner.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | None:
        if self._open is None or not self._open.seeds_left:
            if self.budget is not None and self.budget.spent_out():
                return Searcher.FINISHED
            sampled = self.inner.suggest(trial_id)
            if sampled is None or not isinstance(sampled, dict):
                return sampled  # None (wait) or Searcher.FINISHED
            optuna_trial = self._optuna_trial(trial_id)
            self._open = _Group(
                inner_id=trial_id,
                point=dict(sampled["point"]),
                seeds_left=list(self.seeds),
                number=getattr(optuna_trial, "number", None),
            )
            self._note(trial_id, seeds=self.seeds, completed_trials_seen=self._completed())
        group = self._open
        seed = group.seeds_left.pop(0)
        group.trial_ids.append(trial_id)
        self._groups[trial_id] = group
        config = {"point": dict(group.point), "seed": seed}
        if group.number is not None:
            config["sample"] = group.number
        return config

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        if self.budget is not None:
            self.budget.observe(trial_id, result)
        self._last[trial_id] = result
        group = self._groups.get(trial_id)
        if group is None or trial_id != group.inner_id or result.get(RESULT_FAILURE_REASON):
            return
        if not self._told_before_restore(group.inner_id):
            self.inner.on_trial_result(trial_id, result)

    def on_trial_complete(self, trial_id: str, result: dict | None = None, error: bool = False) -> None:
        if self.budget is not None:
            self.budget.observe(trial_id, result)
        group = self._groups.get(trial_id)
        if group is None:
            return
        if not result and not error:  # stopped by the scheduler while paused (HyperBand)
            result = self._last.get(trial_id)
        self._last.pop(trial_id, None)
        failed = error or not result or bool(result.get(RESULT_FAILURE_REASON))
        group.results[trial_id] = None if failed else result
        if group.seeds_left or len(group.results) < len(group.trial_ids):
            return  # replicates still to come or running
        if self._told_before_restore(group.inner_id):
            return  # the killed driver told Optuna after the snapshot this state came from
        self._record_runs(group)
        finished = [r for r in group.results.values() if r is not None]
        if not finished:
            self.inner.on_trial_complete(group.inner_id, None, error=True)
            return
        mean = {}
        for metric in self.metrics:
            values = [float(r[metric]) for r in finished if _is_number(r.get(metric))]
            mean[metric] = sum(values) / len(values) if values else float("nan")
        if any(math.isnan(v) for v in mean.values()):
            self.inner.on_trial_complete(group.inner_id, None, error=True)
        elif any(_stopped_early(r) for r in finished):
            self.inner.on_trial_complete(group.inner_id, None, error=False)  # Optuna: PRUNED
        else:
            self.inner.on_trial_complete(group.inner_id, {**finished[-1], **mean})

    # -- the Optuna trial's user attributes (see tune.optuna_study) -----------------------------
    def _optuna_trial(self, inner_id: str):
        return getattr(self.inner, "_ot_trials", {}).get(inner_id)  # Ray's OptunaSearch keeps them

    def _completed(self) -> int | None:
        study = getattr(self.inner, "_ot_study", None)
        if study is None:
            return None
        import optuna

        return len(study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,)))

    def _told_before_restore(self, inner_id: str) -> bool:
        trial = self._optuna_trial(inner_id)
        return trial is not None and trial.number in self._finished_before_restore

    def _reconcile_with_optuna(self) -> None:
        """After a restore: note which points Optuna already finished, and close as FAIL the
        Optuna trials a killed driver asked for after this state was saved (nothing will tell them)."""
        study = getattr(self.inner, "_ot_study", None)
        if study is None:
            return
        import optuna

        known = {t.number for t in getattr(self.inner, "_ot_trials", {}).values()}
        for trial in study.get_trials(deepcopy=False):
            if trial.state.is_finished():
                self._finished_before_restore.add(trial.number)
            elif trial.state == optuna.trial.TrialState.RUNNING and trial.number not in known:
                study._storage.set_trial_user_attr(
                    trial._trial_id, "abandoned", "asked by a driver killed before Tune saved its state"
                )
                study.tell(trial.number, state=optuna.trial.TrialState.FAIL)

    def _note(self, inner_id: str, **attrs: Any) -> None:
        trial = self._optuna_trial(inner_id)
        if trial is None:
            return
        for key, value in attrs.items():
            if value is not None:
                trial.set_user_attr(key, value)

    def _record_runs(self, group: _Group) -> None:
        """Tune trial ids and MLflow runs of a point, before Optuna is told (then it is final)."""
        runs = [mlflow_run_id(t) for t in group.trial_ids]
        self._note(
            group.inner_id,
            tune_trial_ids=list(group.trial_ids),
            mlflow_run_ids=[r for r in runs if r],
            mlflow_parent_run_id=self.parent_run_id or None,
        )

    def save(self, checkpoint_path: str) -> None:
        """Into Tune's staging folder; Tune copies it to the execution folder through
        `tune.signed_storage.filesystem()`, which signs it on the way."""
        data = pickle.dumps(self.__dict__)
        Path(checkpoint_path).write_bytes(data)
        state_digest.vouch(data)  # this driver's own state: `restore` takes it back

    def restore(self, checkpoint_path: str) -> None:
        """A pickle runs code: unpickled only when this driver wrote or verified these bytes (Tune's
        staging copy was verified as it was copied there) or the execution's record vouches for them
        (see tune.state_digest)."""
        self.__dict__.update(pickle.loads(state_digest.read_verified(Path(checkpoint_path))))
        self.__dict__.setdefault("_finished_before_restore", set())  # a state saved before it existed
        self.__dict__.setdefault("budget", None)
        self._reconcile_with_optuna()


def _stopped_early(result: dict) -> bool:
    planned, epoch = result.get(RESULT_PLANNED_EPOCHS), result.get("epoch")
    return _is_number(planned) and _is_number(epoch) and epoch < planned


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(float(value))
