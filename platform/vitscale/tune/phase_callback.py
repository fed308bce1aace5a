"""The MLflow callback of a comparison phase (tune, confirm, final): every child run also gets
`vitscale.phase` and `vitscale.arm` (tuning runs at a lower fidelity also `vitscale.fidelity`), and
a phase ending does not end the study's parent run (more phases follow)."""

from __future__ import annotations

import json
from typing import Any

from vitscale.tracking import layout, store
from vitscale.tracking.tune_callback import MlflowStudyCallback


class PhaseCallback(MlflowStudyCallback):
    def __init__(
        self,
        *args: Any,
        phase: str,
        arm: dict | None,
        arm_fields: list[str],
        fidelity: dict | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.phase = phase
        self.fidelity = fidelity or None  # the tuning phase's search.fidelity
        self.arm = arm  # tune, confirm: the phase's one arm; final: None, read from each trial's point
        self.arm_fields = list(arm_fields)

    def _arm_tag(self, config: dict) -> str:
        values = self.arm or {k: (config.get("point") or {}).get(k) for k in self.arm_fields}
        return layout.arm_key(values)

    def run_id(self, trial) -> str:
        known = trial.trial_id in self._runs
        run_id = super().run_id(trial)
        if not known:  # first sight in this driver (created, or found again after a resume)
            tags = {layout.PHASE: self.phase, layout.ARM: self._arm_tag(trial.config)}
            if self.fidelity:
                tags[layout.FIDELITY] = json.dumps(self.fidelity, sort_keys=True)
            store.set_tags(self.queue_client([trial]), run_id, tags)
        return run_id

    def run_name(self, trial, description) -> str:
        """'tune · ssog · ode · #7 · s0' and 'confirm · ssog · ode · #7 · s0' (a phase of one arm:
        what its points vary follows the arm), 'final · ssog · ode · s100' (a final run is its arm's
        tuned point: the arm names it)."""
        if self.arm is None:
            arm = {k: (trial.config.get("point") or {}).get(k) for k in self.arm_fields}
            return layout.run_name(arm, trial.config.get("seed"), phase=self.phase)
        return layout.NAME_SEP.join([layout.run_name(self.arm, phase=self.phase), description.run_name])

    def arm_of(self, trial, description) -> str:
        return self._arm_tag(trial.config)  # tracking.checkpoints: best picks per comparison arm

    def on_experiment_end(self, trials, **info) -> None:
        self.log_best_checkpoints(trials)  # the comparison ends the parent run after its last phase
