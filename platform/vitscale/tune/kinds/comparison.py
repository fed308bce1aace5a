"""`kind: comparison` on Ray Tune: its phases (`tune.comparison.run_comparison`: one train
experiment per arm, then the final runs), which a resume continues where they stopped. Its trials
are a train study's (each phase's spec is kind train); its summary ranks arms by final runs."""

from __future__ import annotations

from dataclasses import replace

from vitscale.tune.comparison import run_comparison
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.kinds.train import TRAIN_TUNE
from vitscale.tune.optuna_study import no_optuna_study
from vitscale.tune.status_from_mlflow import arm_phase
from vitscale.tune.summary import final_arm_best

COMPARISON_TUNE = TUNE_KINDS.register(
    "comparison",
    replace(
        TRAIN_TUNE,
        run=run_comparison,
        resume=run_comparison,  # skips the phases already done
        best=final_arm_best,
        status_phase=arm_phase,
        uses_optuna=no_optuna_study,
        optuna_per_arm=True,
    ),
)
