"""The study specification: a YAML file -> a validated `StudySpec` -> trials.

For runners (Ray Tune) the whole interface is:

    spec = load_study(path, overrides=["trial.train.epochs=2"])   # SpecError lists every problem
    seeds = spec.search.seeds                     # always a list; each seed is its own trial
    count_trials(spec)                            # grid points (or num_samples) x len(seeds)
    grid_points(spec)                             # grid studies: every point, without seeds
    suggest_point(optuna_trial, spec, prefix="")  # samplers: Optuna define-by-run body
    sample_point(spec, sampler)                   # the same with any sampler(key, Param) callback
    active_params(spec, partial_point)            # keys active so far, in dependency order
    resolve_trial(spec, point, seed)              # -> TrialConfig (decodes Optuna labels)
    run_trial(spec, point, seed)                  # -> TrialConfig as a worker runs it (threads set)
    describe_point(point, seed, sample)           # the run name (tracking.layout.run_name)
    run_params(trial), config_key(trial)          # MLflow params (active sections); replicate key
    flatten(trial)                                # every key, every section
    spec_hash(spec), dump_spec(spec)              # parent-run tag; resolved spec YAML artifact

A point maps space keys to values (active parameters only); see `vitscale.study.resolve`.
"""

from vitscale.study.distributions import Param, label
from vitscale.study.errors import Problem, SpecError
from vitscale.study.loading import is_space_file, load_space, load_study, read_study, validate_study
from vitscale.study.overrides import apply_overrides, parse_override
from vitscale.study.plan import count_trials
from vitscale.study.resolve import (
    active_params,
    config_key,
    decode_point,
    describe_point,
    dump_spec,
    flatten,
    grid_points,
    resolve_trial,
    run_params,
    run_trial,
    sample_point,
    spec_dict,
    spec_hash,
    suggest_point,
)
from vitscale.study.schema import space_schema, study_schema
from vitscale.study.spec import (
    FailureConfig,
    Objective,
    ResourcesConfig,
    SchedulerConfig,
    SearchConfig,
    StudySpec,
    TrackingConfig,
)

__all__ = [
    "FailureConfig",
    "Objective",
    "Param",
    "Problem",
    "ResourcesConfig",
    "SchedulerConfig",
    "SearchConfig",
    "SpecError",
    "StudySpec",
    "TrackingConfig",
    "active_params",
    "apply_overrides",
    "config_key",
    "count_trials",
    "decode_point",
    "describe_point",
    "dump_spec",
    "flatten",
    "grid_points",
    "is_space_file",
    "label",
    "load_space",
    "load_study",
    "parse_override",
    "read_study",
    "resolve_trial",
    "run_params",
    "run_trial",
    "sample_point",
    "spec_dict",
    "spec_hash",
    "space_schema",
    "study_schema",
    "suggest_point",
    "validate_study",
]
