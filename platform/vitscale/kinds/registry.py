"""Name -> StudyKind: what each `kind:` of a study file (train, benchmark, comparison) is.

A study kind is one object, registered by name like a mixer or a regime. It is plain data that every
layer reads, so it sits below all of them (tracking, study, analysis, tune and the CLI each read it;
none of them may import another): its defaults, the names of the analysis steps and report sections
it runs (each looked up in that layer's own table: `analysis.steps.STEPS`,
`analysis.report.sections.SECTIONS`) and the wording of its summaries. What a kind *does* in a layer
(its trials, checks, summaries) is that layer's entry for the kind's name in a `table.KindTable`
the layer owns; no module asks a study which kind it is by a flag or a name.

`StudyKind` is the protocol a kind meets; `KindData` is the frozen dataclass the shipped kinds use.
`register_kind` refuses, in one line, an object that lacks a field or gives one of the wrong type,
so a plugin kind fails where it registers, not deep in a run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, get_type_hints, runtime_checkable

from vitscale.errors import UserError


class KindError(UserError):
    """A study kind declared or registered incompletely: one line naming the kind and what it lacks."""


@runtime_checkable
class StudyKind(Protocol):
    """What every layer reads of a study kind: its name, defaults and wording, all plain data."""

    name: str
    title: str  # the report's headline: "Training study · ..."
    trial_section: str  # the spec section that sets its trials' seed and device ("trial.train")
    default_objective: tuple[str, str]  # (metric, mode) where `objectives` is unset
    analysis_steps: tuple[str, ...]  # `vitscale analyze`, in order: names in analysis.steps.STEPS
    report_sections: tuple[str, ...]  # report.md after its header: names in analysis.report.sections.SECTIONS
    series_label: str  # the column that names a configuration's series in summaries ("mixer")
    # Outcome counts, `str.format` over AnalysisResult.counts(): report.md's header line, the
    # sentence under it (also given `incomplete` and `policy`), `vitscale analyze`'s count line
    # (also given `phases`).
    report_counts: str
    report_statistics: str
    cli_counts: str
    # report.md's table of trials left out: (title, the line when there are none, column -> header)
    failures: tuple[str, str, tuple[tuple[str, str], ...]]
    summary_title: str  # `vitscale analyze`'s table: "<study>: <summary_title> summary"
    points_noun: str  # `study validate`: "12 trials = 12 <points_noun>s x 1 seed" (grid studies)


@dataclass(frozen=True)
class KindData:
    """A study kind as plain data: the fields of `StudyKind`, frozen (see `kinds/train.py`)."""

    name: str
    title: str
    trial_section: str
    default_objective: tuple[str, str]
    analysis_steps: tuple[str, ...]
    report_sections: tuple[str, ...]
    series_label: str
    report_counts: str
    report_statistics: str
    cli_counts: str
    failures: tuple[str, str, tuple[tuple[str, str], ...]]
    summary_title: str
    points_noun: str


FIELDS = get_type_hints(StudyKind)  # field -> its type, what register_kind checks
STUDY_KINDS: dict[str, StudyKind] = {}


def _wrong_fields(kind: object) -> list[str]:
    """The fields of StudyKind that `kind` lacks, or holds as another type than declared."""
    wrong = []
    for field, hint in FIELDS.items():
        if not hasattr(kind, field):
            wrong.append(f"{field} (missing)")
            continue
        value, expected = getattr(kind, field), getattr(hint, "__origin__", hint)
        if not isinstance(value, expected):
            wrong.append(f"{field} ({type(value).__name__}, not {expected.__name__})")
        elif expected is tuple and field != "failures" and not all(isinstance(v, str) for v in value):
            wrong.append(f"{field} (a tuple of str)")
    return wrong


def register_kind(kind: StudyKind) -> StudyKind:
    """Add `kind` to STUDY_KINDS under its name; a name registers once, and only a whole StudyKind."""
    wrong = _wrong_fields(kind)
    if wrong or not isinstance(kind, StudyKind):
        name = getattr(kind, "name", type(kind).__name__)
        raise KindError(
            f"study kind {name!r} is not a StudyKind (vitscale.kinds.registry): {', '.join(wrong)}"
        )
    if kind.name in STUDY_KINDS:
        raise ValueError(f"study kind {kind.name!r} is registered twice")
    STUDY_KINDS[kind.name] = kind
    return kind


def study_kind(name: str) -> StudyKind:
    """The registered kind called `name` (a study's `kind:`, a run's `vitscale.kind` tag)."""
    try:
        return STUDY_KINDS[name]
    except KeyError:
        raise UserError(f"kind: {name!r} is not a study kind; use one of {', '.join(STUDY_KINDS)}") from None
