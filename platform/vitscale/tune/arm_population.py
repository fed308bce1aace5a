"""Population-based training within each arm: one PBT (or PB2) scheduler per arm, and the
population it evolves.

An exploit copies a member's checkpoint into another member: across arms that would hand an ODE
ViT's weights to a discrete one, so `ArmPopulation` keeps one of Ray's population schedulers per
arm (the arm: `layout.ARM_FIELDS` of the trial, as `tune.arm_asha` groups them) and shows each
only its own arm's trials; a comparison tunes each arm in its own experiment, so there the arm's
population is the experiment's. Members exploit synchronously: every `perturbation_interval`
epochs the arm's members wait for each other, the worst quantile continue from a best member's
checkpoint of that epoch with changed values; a member copied from keeps its checkpoints until
the copy has restored it (`extra_checkpoints`), and a driver killed in between resumes exactly.
A member's last epoch is never exploited (there is nothing left to train with new values).

The population is drawn up front (`population_search`): the grid, or `search.num_samples` points
of the sampler (random, qmc), each mutated key missing from the space drawn from its mutation.
Ray refuses a searcher beside PBT, so the points travel as a grid of points. Each member keeps
the point it was drawn as under `INITIAL` (set when the scheduler first sees it): its MLflow run is described by it (its params never
change), while `point`, which the trainable runs, follows the exploits.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import optuna
from ray import tune
from ray.tune.schedulers import FIFOScheduler, TrialScheduler

from vitscale.study import grid_points, suggest_point
from vitscale.study.population import population_mutations
from vitscale.study.spec import DEFAULT_PERTURBATION_INTERVAL, DEFAULT_QUANTILE_FRACTION
from vitscale.tracking.layout import RESULT_PLANNED_EPOCHS
from vitscale.tune.arm_asha import arm_of_config
from vitscale.tune.samplers import SAMPLERS

INITIAL = "initial"  # config key: the member's point as drawn (what its run's params describe)
IDENTITY = (INITIAL,)  # config keys that stay the member's own when it copies another's config
RANDOM_DRAWS = "random"  # the sampler of mutated keys a grid does not set


class _ArmView:
    """The Tune controller as one arm's scheduler sees it: that arm's trials only (Ray's PBT
    reads every trial of the controller: its quantiles, its synchronisation, its next trial)."""

    def __init__(self, controller, members: Callable[[Any], bool]) -> None:
        self._controller = controller
        self._members = members

    def get_trials(self):
        return [t for t in self._controller.get_trials() if self._members(t)]

    def get_live_trials(self):
        return [t for t in self._controller.get_live_trials() if self._members(t)]

    def __getattr__(self, name: str):
        return getattr(self._controller, name)


class ArmPopulation(FIFOScheduler):
    """One population scheduler per arm, built by `build()` (picklable: the tuner is saved)."""

    def __init__(self, spec, build: Callable[[], Any], name: str) -> None:
        super().__init__()
        self.spec = spec
        self.build = build
        self.name = name
        self._by_arm: dict[str, Any] = {}
        self._arm: dict[str, str] = {}  # trial id -> arm
        self._own: dict[str, dict[str, Any]] = {}  # trial id -> its IDENTITY values
        self._restored: dict[str, float] = {}  # trial id -> the epoch a resumed driver found it at
        self._aligned: set[str] = set()  # arms whose scheduler state was rebuilt after a resume

    def set_search_properties(self, metric, mode, **spec) -> bool:
        return not metric and not mode  # set in the constructor, like Tune's schedulers

    def _arm_of(self, trial) -> str:
        if trial.trial_id not in self._arm:
            self._arm[trial.trial_id] = arm_of_config(trial.config, self.spec)
        return self._arm[trial.trial_id]

    def _scheduler(self, controller, trial):
        """(the trial's arm scheduler, the controller as that arm sees it)."""
        arm = self._arm_of(trial)
        if arm not in self._by_arm:
            self._by_arm[arm] = self.build()
        view = _ArmView(controller, lambda t: t.trial_id in self._arm and self._arm[t.trial_id] == arm)
        return self._by_arm[arm], view

    def _align_restored(self, arm: str, scheduler, view) -> None:
        """After a resume, put the arm's population back in step (once, before it is used).

        Ray's scheduler state is not saved: a resumed driver builds it empty, as if every member
        were at epoch 0 and none perturbed, while the members are restored where the killed driver
        left them, some a step ahead (they had reported and were waiting). Perturbing them from
        there would copy a checkpoint of one epoch into a member at another. So: the last step
        every member completed is the last perturbation (`boundary`), the next is one interval on,
        and members already there wait with the score they reported. Called where the arm is
        first used to schedule (a result, a choice of trial), not as trials are added: a resume
        adds them one by one, and the step is known only once all are there."""
        if not self._restored or arm in self._aligned:
            return
        if not any(t.trial_id in self._restored for t in view.get_trials()):
            return
        self._aligned.add(arm)
        live = [t for t in view.get_trials() if t.status not in ("TERMINATED", "ERROR")]
        if not live:
            return
        interval = scheduler._perturbation_interval
        boundary = int(min(self._restored.get(t.trial_id, 0) for t in live)) // interval * interval
        for trial in live:
            epoch = self._restored.get(trial.trial_id)
            if epoch is None or trial not in scheduler._trial_state:
                continue
            state = scheduler._trial_state[trial]
            state.last_train_time = epoch
            state.last_perturbation_time = boundary
            if scheduler._metric in (trial.last_result or {}):
                state.last_result = dict(trial.last_result)
                state.last_score = scheduler._metric_op * trial.last_result[scheduler._metric]
        scheduler._next_perturbation_sync = boundary + interval

    def _keep_identity(self, view) -> None:
        """An exploit copies the donor's whole config: give each member its own IDENTITY back."""
        for trial in view.get_trials():
            own = self._own.get(trial.trial_id)
            if own and any(trial.config.get(k) != v for k, v in own.items()):
                trial.set_config({**trial.config, **own})

    def on_trial_add(self, tune_controller, trial) -> None:
        if INITIAL not in trial.config:  # a new member: as drawn (a restored one has it already)
            trial.set_config({**trial.config, INITIAL: dict(trial.config["point"])})
        self._own[trial.trial_id] = {k: trial.config[k] for k in IDENTITY if k in trial.config}
        # a resumed driver restores a member where the killed one left it: its last result says where
        epoch = (getattr(trial, "last_result", None) or {}).get("epoch")
        if epoch and getattr(trial, "status", None) != "TERMINATED":
            self._restored[trial.trial_id] = float(epoch)
        scheduler, view = self._scheduler(tune_controller, trial)
        scheduler.on_trial_add(view, trial)

    def on_trial_result(self, tune_controller, trial, result) -> str:
        planned, epoch = result.get(RESULT_PLANNED_EPOCHS), result.get("epoch")
        if planned is not None and epoch is not None and epoch >= planned:
            return TrialScheduler.CONTINUE  # its last epoch: nothing left to train with new values
        scheduler, view = self._scheduler(tune_controller, trial)
        self._align_restored(self._arm_of(trial), scheduler, view)
        decision = scheduler.on_trial_result(view, trial, result)
        self._keep_identity(view)
        return decision

    def on_trial_complete(self, tune_controller, trial, result) -> None:
        scheduler, view = self._scheduler(tune_controller, trial)
        scheduler.on_trial_complete(view, trial, result)

    def on_trial_error(self, tune_controller, trial) -> None:
        scheduler, view = self._scheduler(tune_controller, trial)
        scheduler.on_trial_error(view, trial)

    def on_trial_remove(self, tune_controller, trial) -> None:
        scheduler, view = self._scheduler(tune_controller, trial)
        scheduler.on_trial_remove(view, trial)

    def choose_trial_to_run(self, tune_controller):
        """Each arm's pick (the member furthest behind, within its synchronised step); across arms
        the one with the fewest epochs trained."""
        picks = []
        for arm, scheduler in self._by_arm.items():
            view = _ArmView(tune_controller, lambda t, arm=arm: self._arm.get(t.trial_id) == arm)
            self._align_restored(arm, scheduler, view)
            trial = scheduler.choose_trial_to_run(view) or _stalled(view)
            if trial is not None:
                picks.append((scheduler._trial_state[trial].last_train_time, trial))
        return min(picks, key=lambda pick: pick[0])[1] if picks else None

    def debug_string(self) -> str:
        return "\n".join(
            [f"{self.name} per arm ({len(self._by_arm)} arms)"]
            + [f"{arm}: {s.debug_string()}" for arm, s in sorted(self._by_arm.items())]
        )


def _stalled(view):
    """A waiting member of an arm with none running: Ray's synchronous PBT perturbs on a result,
    and waits for members whose last result never reaches it (their last epoch is not passed on,
    or they ended while a resumed driver restored the rest), so nothing would ever run again."""
    trials = view.get_trials()
    if any(t.status == "RUNNING" for t in trials):
        return None
    waiting = [t for t in trials if t.status in ("PENDING", "PAUSED")]
    return waiting[0] if waiting else None


def population_points(spec) -> list[dict[str, Any]]:
    """The initial population: grid points, or `num_samples` draws of the (non-learning) sampler;
    a mutated key the space does not set is drawn from its mutation."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    mutations = population_mutations(spec)
    if spec.search.algorithm == "grid":
        points = grid_points(spec)
        draws = optuna.create_study(sampler=SAMPLERS[RANDOM_DRAWS](spec.search.sampler_seed, 1))
    else:
        sampler = SAMPLERS[spec.search.algorithm](spec.search.sampler_seed, 1)
        draws = optuna.create_study(sampler=sampler)
        points = [None] * spec.search.num_samples
    population = []
    for given in points:
        trial = draws.ask()
        point = dict(given) if given is not None else suggest_point(trial, spec)
        for key, param in mutations.items():
            if key not in point:
                point[key] = param.decode(param.suggest(trial, f"mutation/{key}"))
        population.append(point)
    return population


def population_search(spec, *_args, **_kwargs):
    """(no searcher, every member's point x the seed, 1): Ray's PBT takes no searcher."""
    return (
        None,
        {
            "point": tune.grid_search(population_points(spec)),
            "seed": tune.grid_search(list(spec.search.seeds)),
        },
        1,
    )


def synchronised_checkpoints(spec) -> int:
    """A member copied from may train up to `perturbation_interval` epochs before its copy
    restores: keep that many checkpoints more."""
    return spec.scheduler.perturbation_interval or 1


def population_kind_options(spec, metric: str, mode: str) -> dict[str, Any]:
    """What every population scheduler of a study is built with (the rest is the kind's)."""
    sched = spec.scheduler
    return {
        "time_attr": "epoch",
        "metric": metric,
        "mode": mode,
        "perturbation_interval": sched.perturbation_interval or DEFAULT_PERTURBATION_INTERVAL,
        "quantile_fraction": sched.quantile_fraction or DEFAULT_QUANTILE_FRACTION,
        "synch": True,
    }
