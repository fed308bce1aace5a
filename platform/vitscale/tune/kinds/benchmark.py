"""`kind: benchmark` on Ray Tune: one experiment over every configuration x seed, each timed and
measured by `bench_trial` in a fresh process, ranked per resolution (no one best)."""

from __future__ import annotations

from vitscale.bench.trial import bench_trial, describe_bench_trial
from vitscale.tune.cpu_share import benchmark_threads
from vitscale.tune.kinds import TUNE_KINDS, TuneKind
from vitscale.tune.optuna_study import no_optuna_study
from vitscale.tune.run import resume_experiment, run_experiment
from vitscale.tune.status_from_mlflow import no_phase
from vitscale.tune.summary import configuration_best, no_best
from vitscale.tune.tuner import benchmark_keys, every_point_search

BENCHMARK_TUNE = TUNE_KINDS.register(
    "benchmark",
    TuneKind(
        run=run_experiment,
        resume=resume_experiment,
        trial=bench_trial,
        describe=describe_bench_trial,
        search=every_point_search,
        reported_keys=benchmark_keys,
        reuse_workers=False,  # timings and peak memory need a fresh process
        best_of=no_best,
        best=configuration_best,
        threads=benchmark_threads,
        status_phase=no_phase,
        uses_optuna=no_optuna_study,
    ),
)
