"""Name -> StudyKind: what each `kind:` of a study file (train, benchmark, comparison) decides.

A study kind is one object, registered by name like a mixer or a regime. It is plain data that every
layer reads, so it sits below all of them (tracking, study, analysis, tune and the CLI each read it;
none of them may import another): flags for what its trials do, its defaults, the names of the
analysis steps and report sections it runs (each looked up in that layer's own table:
`analysis.steps.STEPS`, `analysis.report.sections.SECTIONS`) and the wording of its summaries. No module
outside `vitscale.kinds` asks which kind a study is by its name; it asks the kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from vitscale.errors import UserError


@dataclass(frozen=True)
class StudyKind:
    """One study kind. Flags say what its trials do; the rest is data each layer reads."""

    name: str
    title: str  # the report's headline: "Training study · ..."
    # Its trials train a model (fit, epochs, val/test metrics); else each is a configuration of the
    # `benchmark:` section, timed and measured: no epochs, no searcher, a fresh process per trial.
    trains: bool
    # Tune searches this study's own `space` (grid or Optuna); a comparison's arms are train
    # studies that do, a benchmark sweeps its configurations.
    searches: bool
    # Tuned per arm, then its best points re-run over fresh seeds (tags `phase`, `arm`).
    phased: bool
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


STUDY_KINDS: dict[str, StudyKind] = {}


def register_kind(kind: StudyKind) -> StudyKind:
    """Add `kind` to STUDY_KINDS under its name; a name registers once."""
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
