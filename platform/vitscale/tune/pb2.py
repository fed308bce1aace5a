"""`scheduler: {type: pb2}`: Ray Tune's `PB2` (population-based bandits) within each arm
(`tune.arm_population`). An exploit's new values come from a time-varying Gaussian-process bandit
over the mutated ranges (`tune.mutations.pb2_bounds`), fitted to how members' scores changed; it
needs scikit-learn (a dependency of vitscale: the bundled digits set)."""

from __future__ import annotations

import functools

from vitscale.errors import UserError
from vitscale.study.population import population_mutations
from vitscale.tune.arm_population import (
    ArmPopulation,
    population_kind_options,
    population_search,
    synchronised_checkpoints,
)
from vitscale.tune.mutations import KeepInSpace, pb2_bounds
from vitscale.tune.scheduler_registry import SchedulerKind, register_scheduler


def population_based_bandits(spec, metric: str, mode: str, epochs: int) -> ArmPopulation:
    # Imported here, for PB2 studies only: Ray's PB2 module loads scikit-learn and scipy.stats,
    # 0.8 s of every driver's start otherwise on 2 cores (the scheduler registry imports this module).
    from ray.tune.schedulers.pb2 import PB2, import_pb2_dependencies

    if not import_pb2_dependencies():
        raise UserError(
            "scheduler.type: pb2 needs scikit-learn; install it (pip install scikit-learn) or use pbt"
        )
    mutations = population_mutations(spec)
    build = functools.partial(
        PB2,
        **population_kind_options(spec, metric, mode),
        hyperparam_bounds=pb2_bounds(mutations),
        custom_explore_fn=KeepInSpace(mutations),
    )
    return ArmPopulation(spec, build, "pb2")


register_scheduler(
    "pb2",
    SchedulerKind(
        build=population_based_bandits,
        population=population_search,
        extra_checkpoints=synchronised_checkpoints,
    ),
)
