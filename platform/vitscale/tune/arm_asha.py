"""Early stopping that only compares trials of the same arm: ASHA, HyperBand, median stopping.

One scheduler across arms stops the slower-starting arm (an ODE ViT is behind a discrete one at
epoch 5 and often ahead at epoch 50), not the worse one. `ArmScheduler` keeps one of Ray Tune's
own schedulers per arm: an arm is the trial's values of `layout.ARM_FIELDS` (mixer x regime), so rung
cut-offs (ASHA), bracket halvings (HyperBand) and running medians (median stopping) are computed
among trials of one arm only. A study whose space does not vary mixer or regime has one arm, i.e.
the plain scheduler. Every kind stops on the first objective (single objective, see spec.checks).

- `asha`: `ASHAScheduler` (asynchronous successive halving; trials never pause).
- `hyperband`: `tune.hyperband.HyperBand`, Ray's `HyperBandScheduler` made to stop trials in a
  small study (synchronous: a trial pauses at a rung until its bracket's trials reached it, then
  the best 1/reduction_factor go on from their checkpoints); which trial runs next is asked of
  each arm's scheduler in turn, and each settles the paused trials Ray would leave PAUSED forever.
- `bohb` (`search.algorithm: bohb`, whatever scheduler.type says: it must say hyperband):
  `tune.bohb.HyperbandPruning`, Optuna's HyperbandPruner (asynchronous; nothing pauses).
- `median`: `MedianStoppingRule` (stop a trial whose best result is below the median of the
  running averages of the arm's other trials at the same epoch, once `min_samples_required`
  trials of the arm reached it, after `grace_period` epochs); with fewer, Tune may pause a trial to let pending ones run (it
  resumes from its checkpoint).
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler, MedianStoppingRule

from vitscale.study import flatten, resolve_trial
from vitscale.tracking import layout
from vitscale.tune.bohb import HyperbandPruning
from vitscale.tune.hyperband import HyperBand
from vitscale.tune.scheduler_registry import SchedulerKind, register_scheduler

# scheduler.type -> scheduler of one arm; a search algorithm listed here stops its own points
# (study.spec.SEARCH_SCHEDULERS: the scheduler section it reads) and overrides scheduler.type
KINDS = {
    "asha": ASHAScheduler,
    "hyperband": HyperBand,
    "median": MedianStoppingRule,
    "bohb": HyperbandPruning,
}


def arm_of_config(config: dict[str, Any], spec) -> str:
    """'model.mixer=ssog,model.regime=ode' for a trial config {"point": ..., "seed": ...}."""
    return layout.train_arm(flatten(resolve_trial(spec, config.get("point") or {}, config.get("seed", 0))))


def scheduler_for(spec, metric: str, mode: str, epochs: int):
    """The spec's scheduler, one instance per arm; FIFO when none is asked for."""
    sched = spec.scheduler
    kind = spec.search.algorithm if spec.search.algorithm in KINDS else sched.type
    common = {"time_attr": "epoch", "metric": metric, "mode": mode}
    if kind in ("asha", "bohb"):
        options = {
            "max_t": sched.max_t or epochs,
            "grace_period": sched.grace_period,
            "reduction_factor": sched.reduction_factor,
        }
    elif kind == "hyperband":
        options = {"max_t": sched.max_t or epochs, "reduction_factor": sched.reduction_factor}
    elif kind == "median":
        options = {"grace_period": sched.grace_period, "min_samples_required": sched.min_samples_required}
    else:
        return FIFOScheduler()
    return ArmScheduler(spec, kind, **common, **options)


class ArmScheduler(FIFOScheduler):
    """A scheduler of kind `kind` (see KINDS) per arm; trials start in submission order (FIFO)
    except that HyperBand chooses which of its paused trials goes on."""

    def __init__(self, spec, kind: str = "asha", **options: Any) -> None:
        super().__init__()
        self.spec = spec
        self.kind = kind
        self.options = options
        self._metric = options["metric"]
        self._by_arm: dict[str, Any] = {}
        self._arm: dict[str, str] = {}  # trial id -> arm
        self._known: set[str] = set()  # trial ids added to their arm's scheduler

    @property
    def arms(self) -> list[str]:
        """The arms met so far (ARM tags), each with a scheduler of its own."""
        return sorted(self._by_arm)

    def set_search_properties(self, metric, mode, **spec) -> bool:
        return not metric and not mode  # set in the constructor, like Tune's schedulers

    def _scheduler(self, trial):
        if trial.trial_id not in self._arm:
            self._arm[trial.trial_id] = arm_of_config(trial.config, self.spec)
        arm = self._arm[trial.trial_id]
        if arm not in self._by_arm:
            self._by_arm[arm] = KINDS[self.kind](**self.options)
        return self._by_arm[arm]

    def _added(self, tune_controller, trial):
        """The arm's scheduler, with `trial` added (a restored trial's bracket map was not saved)."""
        scheduler = self._scheduler(trial)
        if trial.trial_id not in self._known:
            self._known.add(trial.trial_id)
            scheduler.on_trial_add(tune_controller, trial)
        return scheduler

    def on_trial_add(self, tune_controller, trial) -> None:
        self._added(tune_controller, trial)

    def on_trial_error(self, tune_controller, trial) -> None:
        self._added(tune_controller, trial).on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller, trial, result) -> str:
        return self._added(tune_controller, trial).on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result) -> None:
        self._added(tune_controller, trial).on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller, trial) -> None:
        self._added(tune_controller, trial).on_trial_remove(tune_controller, trial)

    def choose_trial_to_run(self, tune_controller):
        if self.kind != "hyperband":
            return super().choose_trial_to_run(tune_controller)
        for scheduler in self._by_arm.values():  # asked every step: a cheap place to sweep
            scheduler.resume_or_stop_paused(tune_controller)
        for scheduler in self._by_arm.values():
            trial = scheduler.choose_trial_to_run(tune_controller)
            if trial is not None:
                return trial
        return None

    def debug_string(self) -> str:
        return "\n".join(
            [f"{self.kind} per arm ({len(self._by_arm)} arms)"]
            + [f"{arm}: {s.debug_string()}" for arm, s in sorted(self._by_arm.items())]
        )


ArmASHA = ArmScheduler  # the name earlier pickled experiments (and imports) use


for _name in ("fifo", "asha", "hyperband", "median"):  # scheduler.type values (bohb: a search algorithm)
    register_scheduler(_name, SchedulerKind(build=scheduler_for))
