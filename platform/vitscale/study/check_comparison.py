"""The checks of a comparison study (`kind: comparison`): arms, reference, final seeds, objectives,
and every arm's own study checked as a train study (see `study.comparison` for the arms); and,
for every other kind, the refusal of the keys only a comparison reads."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import ValidationError

from vitscale.study.check_space import check_structure
from vitscale.study.checks import check_study
from vitscale.study.comparison import arm_list, arm_study, arm_values
from vitscale.study.errors import Problem
from vitscale.study.matching import MatchError
from vitscale.study.paths import lookup
from vitscale.study.spec import StudySpec
from vitscale.tracking.layout import arm_key
from vitscale.validation import error_items


def comparison_problems(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """`kind: comparison` needs arms, a reference arm and final seeds; each arm must be searchable."""
    if not spec.arms:
        yield Problem(
            "arms", "required for kind: comparison: trial path -> values, e.g. {model.mixer: [a, b]}"
        )
        return
    yield from _arm_keys(spec)
    if spec.final is None:
        yield Problem("final", "required for kind: comparison, e.g. final: {seeds: [100, 101, 102]}")
    elif spec.tuned_from is None:  # else the source's tuning seeds, checked when the study starts
        yield from _disjoint_seeds(spec)
    yield from _fidelity(spec)
    yield from _confirm(spec)
    yield from _tuned_from(spec)
    yield from _reference(spec)
    yield from _match(spec)
    if len(spec.objectives) != 1 or not spec.objectives[0].metric.startswith("val_"):
        yield Problem(
            "objectives",
            "a comparison selects each arm's best config on one validation metric, e.g. "
            "[{metric: val_top1, mode: max}]",
        )
    if spec.search.algorithm == "grid" and spec.search.num_samples is not None:
        return  # reported by the search checks
    yield from _arm_checks(spec, removed)


def comparison_keys_refused(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """Every other kind: the keys of a comparison would be ignored, so each is refused."""
    for key in ("arms", "reference", "final", "tuned_from"):
        if getattr(spec, key) is not None:
            yield Problem(key, "only for kind: comparison")
    if spec.match is not None:
        yield Problem("match", "only for kind: comparison (parameter-matched arms)")
    if spec.search.fidelity:
        yield Problem(
            "search.fidelity",
            "only for kind: comparison (its tuning phase runs at this fidelity, the final phase at "
            "the trial's); a train study has no final phase: set the values in trial instead",
        )
    if spec.search.confirm is not None and not spec.search.fidelity:  # else filled in for the fidelity
        yield Problem(
            "search.confirm",
            "only for kind: comparison with search.fidelity (it re-runs each arm's top points at "
            "full fidelity); remove it",
        )


def _arm_keys(spec: StudySpec) -> Iterable[Problem]:
    for key, values in spec.arms.items():
        node = lookup(key)
        if node is None or not node.is_leaf:
            yield Problem(f"arms.{key}", "not a field of the trial (e.g. model.mixer, model.regime)")
        if key in spec.space:
            yield Problem(f"arms.{key}", "also in space: an arm is fixed, not searched; remove one")
        if not values:
            yield Problem(f"arms.{key}", "needs at least one value")
        elif len(set(map(repr, values))) != len(values):
            yield Problem(f"arms.{key}", "a value is listed twice")
    if len(arm_list(spec)) < 2:
        yield Problem("arms", "a comparison needs at least two arms")


def _disjoint_seeds(spec: StudySpec) -> Iterable[Problem]:
    """Training is deterministic: a final run on a tuning seed repeats the run selection picked as
    the maximum, so its score is biased upwards, not a fresh draw."""
    shared = sorted(set(spec.final.seeds) & set(spec.search.seeds or []))
    if shared:
        fresh = max([*spec.final.seeds, *(spec.search.seeds or [])]) + 1
        suggestion = list(range(max(fresh, 100), max(fresh, 100) + len(spec.final.seeds)))
        yield Problem(
            "final.seeds",
            f"{shared} also tune (search.seeds {spec.search.seeds}): final seeds must be ones selection "
            f"never saw, e.g. final: {{seeds: {suggestion}}}",
        )


def _fidelity(spec: StudySpec) -> Iterable[Problem]:
    for key in spec.search.fidelity or {}:
        node = lookup(key)
        if node is None or not node.is_leaf:
            yield Problem(
                f"search.fidelity.{key}", "not a field of the trial (e.g. data.num_train, train.epochs)"
            )
        elif key in spec.space:
            yield Problem(
                f"search.fidelity.{key}", "also in space: a searched value cannot be fixed for tuning"
            )
        elif key in (spec.arms or {}):
            yield Problem(f"search.fidelity.{key}", "also an arm key: an arm is the same in both phases")
        elif key.startswith("model."):
            yield Problem(
                f"search.fidelity.{key}",
                "the model is what the final phase re-runs: tune at lower fidelity with data.* or train.* keys",
            )


def _confirm(spec: StudySpec) -> Iterable[Problem]:
    """Confirmation re-runs low-fidelity points at full fidelity: without a fidelity (or without a
    tuning phase) there is nothing to confirm, and asking for it would silently do nothing."""
    confirm = spec.search.confirm
    if confirm is None or confirm.top_k == 0 or spec.search.fidelity or spec.tuned_from:
        return  # tuned_from: reported with its own line
    yield Problem(
        "search.confirm",
        "confirms tuning done at search.fidelity, and none is set: tuning already runs at full "
        "fidelity; set search.fidelity (e.g. {data.num_train: 5000, train.epochs: 3}) or remove search.confirm",
    )


def _tuned_from(spec: StudySpec) -> Iterable[Problem]:
    """A borrowed tuning has nothing to search: a space or a fidelity would be silently ignored."""
    if spec.tuned_from is None:
        return
    if spec.space:
        yield Problem(
            "space",
            f"tuned_from {spec.tuned_from!r} takes each arm's tuned point: this study searches nothing; "
            "remove space (or tuned_from, to tune here)",
        )
    if spec.search.fidelity:
        yield Problem("search.fidelity", "tuned_from: no tuning phase runs here; remove search.fidelity")
    if spec.search.confirm is not None:
        yield Problem("search.confirm", "tuned_from: no tuning phase runs here; remove search.confirm")


def _match(spec: StudySpec) -> Iterable[Problem]:
    if spec.match is None or not spec.reference:
        return
    key = spec.match.params
    if key in spec.space or key in spec.arms or key in (spec.search.fidelity or {}):
        yield Problem(
            "match.params", f"{key} is searched, an arm key or a fidelity key: it cannot also be matched"
        )
        return
    for arm in arm_list(spec):
        try:
            arm_values(spec, arm)
        except MatchError as exc:
            yield Problem("match.params", f"{str(exc).partition(': ')[2]} (in arm {arm_key(arm)})")
        except Exception:  # noqa: BLE001 - an arm that builds no valid trial is reported by _arm_checks
            continue


def _reference(spec: StudySpec) -> Iterable[Problem]:
    if not spec.reference:
        yield Problem(
            "reference", "required: the arm deltas are taken against, e.g. {model.mixer: attention}"
        )
        return
    for key, value in spec.reference.items():
        if key not in spec.arms:
            yield Problem(f"reference.{key}", f"not a key of arms ({', '.join(spec.arms)})")
        elif value not in spec.arms[key]:
            yield Problem(f"reference.{key}", f"{value!r} is not one of arms.{key} {spec.arms[key]}")


def _arm_checks(spec: StudySpec, removed: frozenset[str]) -> Iterable[Problem]:
    """Run the train-study checks of each arm's study; trial/space problems name the arm."""
    seen = {(p.key, p.message) for p in check_structure(spec.space)}  # reported by the space checks
    for arm in arm_list(spec):
        try:
            study = arm_study(spec, arm)
        except ValidationError as exc:
            problems = [Problem(f"trial.{k}", m) for k, m in error_items(exc)]
        except Exception:  # noqa: BLE001 - a bad arm key is reported by _arm_keys
            continue
        else:
            problems = [
                p for p in check_study(study, removed=removed) if p.key.startswith(("space", "trial"))
            ]
        for p in problems:
            if (p.key, p.message) not in seen:
                seen.add((p.key, p.message))
                yield Problem(p.key, f"{p.message} (in arm {arm_key(arm)})")
