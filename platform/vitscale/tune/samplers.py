"""Optuna samplers by name. A new sampler is one entry here (and its name in the spec's enum)."""

from __future__ import annotations

from collections.abc import Callable

import optuna


def _tpe(seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    # multivariate + group model the conditional (`when:`) parameters jointly.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True)


def _nsga2(seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(seed=seed)


def _cmaes(seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    # CMA-ES models the continuous and integer parameters; categoricals fall back to random.
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def _random(seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _qmc(seed: int | None, n_objectives: int) -> optuna.samplers.BaseSampler:
    return optuna.samplers.QMCSampler(
        seed=seed, qmc_type="sobol", scramble=True, warn_independent_sampling=False
    )


SAMPLERS: dict[str, Callable[[int | None, int], optuna.samplers.BaseSampler]] = {
    "tpe": _tpe,
    "nsga2": _nsga2,
    "cmaes": _cmaes,
    "random": _random,
    "qmc": _qmc,
}
