"""`scheduler: {type: pbt}`: Ray Tune's `PopulationBasedTraining` within each arm
(`tune.arm_population`). An exploit perturbs each mutated value of the member it copies (x0.8 or
x1.2, a neighbouring choice) or, with `resample_probability`, draws it afresh; values stay on the
study's distributions (`tune.mutations`)."""

from __future__ import annotations

import functools

from ray.tune.schedulers import PopulationBasedTraining

from vitscale.study.population import population_mutations
from vitscale.study.spec import DEFAULT_RESAMPLE_PROBABILITY
from vitscale.tune.arm_population import (
    ArmPopulation,
    population_kind_options,
    population_search,
    synchronised_checkpoints,
)
from vitscale.tune.mutations import KeepInSpace, pbt_mutations
from vitscale.tune.scheduler_registry import SchedulerKind, register_scheduler


def population_based_training(spec, metric: str, mode: str, epochs: int) -> ArmPopulation:
    mutations = population_mutations(spec)
    resample = spec.scheduler.resample_probability
    build = functools.partial(
        PopulationBasedTraining,
        **population_kind_options(spec, metric, mode),
        hyperparam_mutations=pbt_mutations(mutations),
        resample_probability=DEFAULT_RESAMPLE_PROBABILITY if resample is None else resample,
        custom_explore_fn=KeepInSpace(mutations),
    )
    return ArmPopulation(spec, build, "pbt")


register_scheduler(
    "pbt",
    SchedulerKind(
        build=population_based_training,
        population=population_search,
        extra_checkpoints=synchronised_checkpoints,
    ),
)
