"""The study kinds registry: every kind's steps and sections resolve in the layers that run them,
`kind:` accepts exactly the registered names, and bad names fail with one line."""

from __future__ import annotations

import typing
from dataclasses import replace

import pytest

from vitscale.analysis.report.sections import SECTIONS
from vitscale.analysis.steps import STEPS
from vitscale.errors import UserError
from vitscale.kinds import STUDY_KINDS, register_kind, study_kind
from vitscale.study.spec import KindName, StudySpec


def test_the_three_kinds_are_registered_in_order():
    assert list(STUDY_KINDS) == ["train", "benchmark", "comparison"]
    assert typing.get_args(KindName) == tuple(STUDY_KINDS)
    assert StudySpec.model_json_schema()["properties"]["kind"]["enum"] == list(STUDY_KINDS)


@pytest.mark.parametrize("name", list(STUDY_KINDS))
def test_every_step_and_section_of_a_kind_exists(name):
    kind = STUDY_KINDS[name]
    assert [s for s in kind.analysis_steps if s not in STEPS] == []
    assert [s for s in kind.report_sections if s not in SECTIONS] == []
    assert kind.analysis_steps and kind.report_sections


def test_a_benchmark_speaks_of_measured_runs_not_training():
    bench = study_kind("benchmark")
    counts = dict(runs=3, used=2, failed=1, killed=0, other=0, stopped_early=0, did_not_train=0)
    wording = [
        bench.report_counts.format(**counts),
        bench.report_statistics,
        bench.cli_counts.format(**counts, phases="", killed_or_other=0),
        *bench.failures[:2],
    ]
    for text in wording:
        assert "train" not in text and "stopped early" not in text, text
    assert bench.report_counts.format(**counts) == "2 measured, 1 failed, 0 killed, 0 other"
    train = study_kind("train").report_counts.format(**counts)
    assert "0 of them did not train" in train


def test_a_comparison_trains_in_phases_and_searches_through_its_arms():
    comparison, train = study_kind("comparison"), study_kind("train")
    assert comparison.trains and comparison.phased and not comparison.searches
    assert train.searches and not train.phased
    assert comparison.analysis_steps == train.analysis_steps


def test_a_kind_registers_once():
    with pytest.raises(ValueError, match="'train' is registered twice"):
        register_kind(replace(STUDY_KINDS["train"], title="Again"))
    assert STUDY_KINDS["train"].title == "Training"


def test_an_unknown_kind_is_one_line_naming_the_registered_ones():
    with pytest.raises(
        UserError, match=r"kind: 'sweep' is not a study kind; use one of train, benchmark, comparison"
    ):
        study_kind("sweep")


def test_the_kind_sets_the_default_objective_and_seed():
    bench = StudySpec(name="b", kind="benchmark", benchmark={"seed": 7})
    assert (bench.objectives[0].metric, bench.search.seeds) == ("images_per_second", [7])
    train = StudySpec(name="t", trial={"train": {"seed": 3}})
    assert (train.objectives[0].metric, train.search.seeds) == ("val_top1", [3])
