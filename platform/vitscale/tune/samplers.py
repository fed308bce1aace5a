"""Optuna samplers by name. A new sampler is one entry here (and its name in the spec's enum)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import optuna

# The TPE options and the QMC sampler we offer on purpose are still flagged experimental: say so
# once here, not on every study run. Optuna's INFO lines ("A new study created in RDB ...") are
# noise in a study's terminal too: the study's own summary says what ran.
warnings.filterwarnings(
    "ignore",
    message=r".*(``(constant_liar|group|multivariate)``|QMCSampler is experimental).*",
    category=optuna.exceptions.ExperimentalWarning,
)
optuna.logging.set_verbosity(optuna.logging.WARNING)


def _tpe(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    # multivariate + group model the conditional (`when:`) parameters jointly; with trials running
    # side by side, constant_liar counts running trials as bad so workers do not draw one point.
    return optuna.samplers.TPESampler(seed=seed, multivariate=True, group=True, constant_liar=concurrent)


def _nsga2(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(seed=seed)


def _cmaes(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    # CMA-ES models the continuous and integer parameters; categoricals fall back to random.
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False)


def _gp(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    # Gaussian-process BO: log EI for one objective, log EHVI for several; running trials enter
    # its acquisition as pending points (q-batch), so side-by-side workers need no lie. Its first
    # 10 points (Optuna's n_startup_trials) are random; parameters outside the space every trial
    # shares (`when:`) are drawn at random too, silently.
    return optuna.samplers.GPSampler(seed=seed, warn_independent_sampling=False)


def _random(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


def _qmc(seed: int | None, n_objectives: int, concurrent: bool = False) -> optuna.samplers.BaseSampler:
    return optuna.samplers.QMCSampler(
        seed=seed, qmc_type="sobol", scramble=True, warn_independent_sampling=False
    )


# (sampler seed, number of objectives, concurrent=trials may run side by side) -> sampler
SAMPLERS: dict[str, Callable[..., optuna.samplers.BaseSampler]] = {
    "tpe": _tpe,
    "bohb": _tpe,  # BOHB's model; its points are stopped by HyperBand per arm (tune.bohb)
    "nsga2": _nsga2,
    "cmaes": _cmaes,
    "gp": _gp,
    "random": _random,
    "qmc": _qmc,
}
