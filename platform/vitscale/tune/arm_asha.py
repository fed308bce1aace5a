"""ASHA that only compares trials of the same arm.

One ASHA across arms stops the slower-starting arm (an ODE ViT is behind a discrete one at epoch
5 and often ahead at epoch 50), not the worse one. `ArmASHA` keeps one ASHA per arm: an arm is
the trial's values of `ARM_FIELDS` (mixer x regime), so rung cut-offs are computed among trials
of one arm only. A study whose space does not vary mixer or regime has one arm, i.e. plain ASHA.
"""

from __future__ import annotations

from typing import Any

from ray.tune.schedulers import ASHAScheduler, FIFOScheduler

ARM_FIELDS = ("model.mixer", "model.regime")


def arm_of_config(config: dict[str, Any], spec) -> str:
    """'model.mixer=ssog,model.regime=ode' for a trial config {"point": ..., "seed": ...}."""
    from vitscale.spec import flatten, resolve_trial

    params = flatten(resolve_trial(spec, config.get("point") or {}, config.get("seed", 0)))
    return ",".join(f"{field}={params.get(field)}" for field in ARM_FIELDS)


class ArmASHA(FIFOScheduler):
    """ASHA brackets keyed by arm; trials start in submission order (FIFO)."""

    def __init__(self, spec, **asha: Any) -> None:
        super().__init__()
        self.spec = spec
        self.asha = asha
        self._metric = asha["metric"]
        self._by_arm: dict[str, ASHAScheduler] = {}
        self._arm: dict[str, str] = {}  # trial id -> arm

    def set_search_properties(self, metric, mode, **spec) -> bool:
        return not metric and not mode  # set in the constructor, like ASHAScheduler

    def _scheduler(self, trial) -> ASHAScheduler:
        if trial.trial_id not in self._arm:
            self._arm[trial.trial_id] = arm_of_config(trial.config, self.spec)
        arm = self._arm[trial.trial_id]
        if arm not in self._by_arm:
            self._by_arm[arm] = ASHAScheduler(**self.asha)
        return self._by_arm[arm]

    def on_trial_add(self, tune_controller, trial) -> None:
        self._scheduler(trial).on_trial_add(tune_controller, trial)

    def on_trial_error(self, tune_controller, trial) -> None:
        self._scheduler(trial).on_trial_error(tune_controller, trial)

    def on_trial_result(self, tune_controller, trial, result) -> str:
        scheduler = self._scheduler(trial)
        if trial.trial_id not in scheduler._trial_info:  # restored: the bracket map was not saved
            scheduler.on_trial_add(tune_controller, trial)
        return scheduler.on_trial_result(tune_controller, trial, result)

    def on_trial_complete(self, tune_controller, trial, result) -> None:
        scheduler = self._scheduler(trial)
        if trial.trial_id in scheduler._trial_info:
            scheduler.on_trial_complete(tune_controller, trial, result)

    def on_trial_remove(self, tune_controller, trial) -> None:
        scheduler = self._scheduler(trial)
        if trial.trial_id in scheduler._trial_info:
            scheduler.on_trial_remove(tune_controller, trial)

    def debug_string(self) -> str:
        return "\n".join(
            [f"ASHA per arm ({len(self._by_arm)} arms)"]
            + [f"{arm}: {s.debug_string()}" for arm, s in sorted(self._by_arm.items())]
        )
