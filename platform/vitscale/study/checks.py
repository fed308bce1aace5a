"""Cross-field rules of a study. `check_study` returns every problem; nothing raises.

Each check declares the top-level sections it reads; when one of those failed Pydantic
validation the check is skipped (its input would be a placeholder), so one mistake is
reported once and every other section is still checked. The rules every study keeps are here
(`CHECKS`); a study kind adds its own (`StudyRules.checks`, `space_checks`, `grid_checks`:
`vitscale.study.kinds`), and the rules of a searched space and of a grid that trains are here
for the kinds that search one (`search_problems`, `trial_space_problems`, `grid_problems`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pydantic import ValidationError

from vitscale.kinds import study_kind
from vitscale.study.check_space import check_against_trial, check_structure
from vitscale.study.errors import Problem
from vitscale.study.kinds import STUDY_RULES
from vitscale.study.population import population_problems
from vitscale.study.resolve import space_points, trial_data
from vitscale.study.space import GRID_LIMIT, SpaceCycle, TooManyPoints, providers
from vitscale.study.spec import SEARCH_SCHEDULERS, StudySpec
from vitscale.train.config import TrialConfig
from vitscale.validation import error_items


def known_metrics(kind: str) -> tuple[str, ...]:
    """What a study may optimise: the trainer's metrics, or (trials that measure) the benchmark's."""
    return STUDY_RULES[kind].metrics


def _objectives(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    known = known_metrics(spec.kind)
    seen: set[tuple[str, str]] = set()
    for i, objective in enumerate(spec.objectives):
        if objective.metric not in known:
            yield Problem(
                f"objectives[{i}].metric",
                f"unknown metric {objective.metric!r}; the {spec.kind} metrics are: {', '.join(known)}",
            )
        elif objective.metric in seen:
            yield Problem(f"objectives[{i}].metric", f"{objective.metric!r} is already an objective")
        seen.add(objective.metric)


def _stopper(spec: StudySpec) -> tuple[str, str]:
    """(key, name) of what stops trials early: a search algorithm with its own stopping (bohb),
    else scheduler.type."""
    if spec.search.algorithm in SEARCH_SCHEDULERS:
        return "search.algorithm", spec.search.algorithm
    return "scheduler.type", spec.scheduler.type


def _scheduler_objectives(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    key, name = _stopper(spec)
    if spec.scheduler.type != "fifo" and len(spec.objectives) > 1:
        yield Problem(
            key,
            f"{name} stops trials on one metric but there are {len(spec.objectives)} objectives; "
            "use fifo or a single objective",
        )


def _scheduler_epochs(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    sched = spec.scheduler
    key, name = _stopper(spec)
    budgeted = spec.trial.train.train_flops is not None or "train.train_flops" in {
        *(spec.arms or {}),
        *spec.space,
    }
    if sched.type in ("asha", "hyperband") and budgeted:
        yield Problem(
            key,
            f"{name}'s rungs count epochs, and train.train_flops gives each trial its own number "
            f"of them; use {'another algorithm (e.g. tpe)' if key == 'search.algorithm' else 'fifo or median'}",
        )
        return
    if sched.type in ("asha", "hyperband") and sched.max_t is not None and sched.grace_period > sched.max_t:
        yield Problem("scheduler.grace_period", f"{sched.grace_period} exceeds max_t {sched.max_t}")


def _search_scheduler(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """bohb stops its points itself, reading the hyperband section: another scheduler is refused."""
    own = SEARCH_SCHEDULERS.get(spec.search.algorithm)
    if own is not None and spec.scheduler.type != own:
        yield Problem(
            "scheduler.type",
            f"{spec.search.algorithm} stops its points with its own HyperBand (per arm), not "
            f"{spec.scheduler.type}: leave scheduler out or give type: {own}",
        )
    if own is not None and spec.scheduler.reduction_factor != int(spec.scheduler.reduction_factor):
        yield Problem(
            "scheduler.reduction_factor",
            f"{spec.scheduler.reduction_factor:g}: {spec.search.algorithm}'s HyperBand keeps 1/n per "
            "rung for a whole n; give 2, 3, 4 ...",
        )


def _seeds(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    dupes = sorted({s for s in spec.search.seeds if spec.search.seeds.count(s) > 1})
    if dupes:
        yield Problem("search.seeds", f"seed(s) {dupes} listed more than once")
    if spec.search.algorithm == "grid" and spec.search.budget is not None:
        yield Problem("search.budget", "a grid runs every point; a budget needs a sampler (e.g. tpe)")


def search_problems(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """A searched space: a grid of listed values, or a sampler with something to sample."""
    search = spec.search
    if search.algorithm == "grid":
        if search.num_samples is not None:
            yield Problem(
                "search.num_samples", "a grid runs every point; remove it (replicates: search.seeds)"
            )
        for key, param in spec.space.items():
            if param.distribution.continuous:
                yield Problem(
                    f"space.{key}",
                    f"{param.kind} is continuous; a grid study needs choice, grid or int values "
                    "(or pick a sampler, e.g. search.algorithm: tpe)",
                )
    else:
        if not spec.space and not removed:
            yield Problem(
                "space", f"{search.algorithm} needs parameters to search; add some or use algorithm: grid"
            )
        for key, param in spec.space.items():
            if param.distribution.grid_only:
                yield Problem(
                    f"space.{key}", f"grid values are for grid studies; use choice with {search.algorithm}"
                )
        if search.algorithm == "cmaes" and len(spec.objectives) > 1:
            yield Problem("search.algorithm", "cmaes optimises one objective; use nsga2 or tpe for several")


def _resources(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    gpu = spec.resources.gpu
    if gpu > 1 and gpu != int(gpu):
        yield Problem("resources.gpu", f"{gpu}: above one GPU per trial, ask for a whole number")
    device = spec.trial_settings.device
    key = f"{study_kind(spec.kind).trial_section}.device"
    if device.startswith("cuda") and gpu == 0:
        yield Problem(key, f"{device} needs resources.gpu > 0 (a trial sees only the GPUs it reserves)")
    workers = spec.resources.workers
    if workers > 1:
        yield from _workers(spec, workers)


def _workers(spec: StudySpec, workers: int) -> Iterable[Problem]:
    """A multi-worker trial (Ray Train DDP) trains one model on whole devices, without distillation."""
    if not STUDY_RULES[spec.kind].multi_worker_trials:
        yield Problem(
            "resources.workers", f"{workers}: a {spec.kind} study times one process; set workers: 1"
        )
        return
    gpu = spec.resources.gpu
    if gpu not in (0, 1):
        yield Problem(
            "resources.gpu", f"{gpu:g} per worker: a data-parallel worker drives one GPU; set gpu: 1 (or 0)"
        )
    if spec.trial.train.distill is not None or any(k.startswith("train.distill") for k in spec.space):
        yield Problem("resources.workers", f"{workers}: distillation trains in one process; set workers: 1")


def space_problems(spec: StudySpec, removed: Iterable[str] = (), with_trial: bool = True) -> list[Problem]:
    """Structure of every parameter, then the kind's rules for the parameters without problems
    (`StudyRules.space_checks`: for a train study, the combination rules against the trial).

    `removed`: parameters already rejected by Pydantic.
    """
    problems = check_structure(spec.space)
    if not with_trial or any(".when" in p.key and "cycle" in p.message for p in problems):
        return problems
    return problems + STUDY_RULES[spec.kind].space_checks(spec, frozenset(removed), problems)


def trial_space_problems(spec: StudySpec, removed: frozenset[str], problems: list[Problem]) -> list[Problem]:
    """The combination rules of a searched space against the trial, on the parameters without
    `problems`. A parameter whose `when:` reads a rejected (`removed`) or broken one is left out
    too: its activity would be judged on a wrong value."""
    every = set(spec.space) | set(removed)
    dropped = {
        k for k in spec.space for p in problems if p.key == f"space.{k}" or p.key.startswith(f"space.{k}.")
    }
    good = dict(spec.space)
    while dropped:
        for key in dropped:
            good.pop(key, None)
        dropped = {
            k
            for k, param in good.items()
            if any(set(providers(every, p)) - set(good) for p in param.conditions())
        }
    return check_against_trial(good, spec.trial, unknown=every - set(good))


def grid_problems(spec: StudySpec) -> Iterable[Problem]:
    """Grid studies: every point must build a valid trial (catches what no single rule names)."""
    if spec.search.algorithm != "grid" or any(p.distribution.continuous for p in spec.space.values()):
        return
    try:
        points = space_points(spec)
    except TooManyPoints:
        yield Problem("space", f"the grid has more than {GRID_LIMIT} points; narrow it or use a sampler")
        return
    except SpaceCycle:
        return
    seen: set[tuple[str, str]] = set()
    for point in points:
        try:
            TrialConfig.model_validate(trial_data(spec, point, spec.search.seeds[0]))
        except ValidationError as exc:
            for key, msg in error_items(exc):
                if (key, msg) not in seen:
                    seen.add((key, msg))
                    combo = ", ".join(f"{k}={v}" for k, v in point.items())
                    yield Problem(f"trial.{key}", f"{msg} (at grid point {combo})")


Check = Callable[[StudySpec, frozenset[str]], Iterable[Problem]]

# The rules of every study: (sections read, check(spec, removed space parameters)).
CHECKS: tuple[tuple[frozenset[str], Check], ...] = (
    (frozenset({"kind", "objectives"}), _objectives),
    (frozenset({"scheduler", "objectives", "search"}), _scheduler_objectives),
    (frozenset({"scheduler", "trial", "space", "search"}), _scheduler_epochs),
    (frozenset({"scheduler", "search"}), _search_scheduler),
    (frozenset({"kind", "search", "space", "objectives"}), _seeds),
    (frozenset({"kind", "resources", "trial", "benchmark"}), _resources),
    (frozenset({"scheduler", "search", "space", "trial", "arms"}), population_problems),
)


def check_study(spec: StudySpec, skip: Iterable[str] = (), removed: Iterable[str] = ()) -> list[Problem]:
    """Every cross-field problem, skipping checks that read a section listed in `skip`: the rules
    of every study, then its kind's (`StudyRules`).

    `removed`: space parameters already rejected (left out of `spec.space`).
    """
    skip, removed = set(skip), frozenset(removed)
    rules = STUDY_RULES[spec.kind]
    problems: list[Problem] = []
    for needs, check in (*CHECKS, *rules.checks):
        if not needs & skip:
            problems += check(spec, removed)
    if "space" not in skip:
        problems += space_problems(spec, removed, with_trial=not skip & {"kind", "trial"})
    if not problems and not skip and not removed:
        problems += rules.grid_checks(spec)
    return problems
