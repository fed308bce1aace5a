"""What the study format does per study kind: `STUDY_RULES`, kind name -> `StudyRules`.

A kind's checks, its trial points, how many trials it plans and what its nulls become live here,
looked up by the kind's name (`vitscale.kinds.table.KindTable`); the modules of this package
register the shipped kinds' entries (`train`, `benchmark`, `comparison`), imported on the table's
first lookup. A plugin kind registers its own with `STUDY_RULES.register(name, StudyRules(...))`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from vitscale.kinds.table import KindTable
from vitscale.study.errors import Problem
from vitscale.study.spec import StudySpec

Check = Callable[[StudySpec, frozenset[str]], Iterable[Problem]]


@dataclass(frozen=True)
class StudyRules:
    """One kind's part of the study format."""

    # Its cross-field rules beside those of every study (`checks.CHECKS`): (sections read, check);
    # a check is skipped where a section it reads failed validation.
    checks: tuple[tuple[frozenset[str], Check], ...]
    # The rules of its space beyond each parameter's structure: (spec, removed parameters,
    # problems found so far) -> more problems (a train study: combinations against the trial).
    space_checks: Callable[[StudySpec, frozenset[str], list[Problem]], list[Problem]]
    # Checks that only make sense once every other passed (a grid: every point builds a trial).
    grid_checks: Callable[[StudySpec], Iterable[Problem]]
    metrics: tuple[str, ...]  # what its `objectives` may name
    points: Callable[[StudySpec], list[dict[str, Any]]]  # its grid points (`grid_points`), without seeds
    count: Callable[[StudySpec], int]  # the trials it plans (`count_trials`)
    trials_line: Callable[[StudySpec], str]  # how it expands, in one line (`study validate`)
    # What its trials run with where the file leaves a value null (`study show`; `defaults`).
    run_defaults: Callable[[StudySpec], list[tuple[list[str], dict[str, Any]]]]
    unused_sections: tuple[str, ...] = ()  # spec sections its record and hash leave out
    multi_worker_trials: bool = True  # may `resources.workers` > 1 (Ray Train); a timing is one process


def no_problems(*_: Any) -> list[Problem]:
    """A kind with nothing more to check at this point."""
    return []


STUDY_RULES: KindTable[StudyRules] = KindTable(
    "study rules (vitscale.study.kinds.StudyRules)",
    "vitscale.study.kinds.STUDY_RULES.register(name, StudyRules(...))",
    builtin=tuple(f"vitscale.study.kinds.{name}" for name in ("train", "benchmark", "comparison")),
)
