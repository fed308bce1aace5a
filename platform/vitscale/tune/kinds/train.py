"""`kind: train` on Ray Tune: one experiment whose trials train (`train_trial`) on workers reused
between trials, over a grid or an Optuna sampler of its space, ranked by its first objective."""

from __future__ import annotations

from vitscale.tune.cpu_share import trial_threads
from vitscale.tune.kinds import TUNE_KINDS, TuneKind
from vitscale.tune.optuna_study import samples_space
from vitscale.tune.run import resume_experiment, run_experiment
from vitscale.tune.status_from_mlflow import no_phase
from vitscale.tune.summary import first_objective, searched_best
from vitscale.tune.trainable import train_trial
from vitscale.tune.tuner import describe_train_trial, space_keys, space_search

TRAIN_TUNE = TUNE_KINDS.register(
    "train",
    TuneKind(
        run=run_experiment,
        resume=resume_experiment,
        trial=train_trial,
        describe=describe_train_trial,
        search=space_search,
        reported_keys=space_keys,
        reuse_workers=True,
        best_of=first_objective,
        best=searched_best,
        threads=trial_threads,
        status_phase=no_phase,
        uses_optuna=samples_space,
    ),
)
