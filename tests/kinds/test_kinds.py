"""The study kinds registry: every kind's steps and sections resolve in the layers that run them,
every layer's table has an entry for every kind, `kind:` accepts exactly the registered names, and
bad names, incomplete kinds and missing entries fail with one line."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.analysis.report.sections import SECTIONS
from vitscale.analysis.steps import STEPS
from vitscale.bench.trial import bench_trial
from vitscale.errors import UserError
from vitscale.kinds import (
    STUDY_KINDS,
    KindData,
    KindError,
    KindTable,
    check_complete,
    register_kind,
    study_kind,
)
from vitscale.kinds.table import TABLES, missing_entries
from vitscale.study.kinds import STUDY_RULES
from vitscale.study.spec import StudySpec
from vitscale.tracking.parent_summary import PARENT_RUNS
from vitscale.tune.comparison import run_comparison
from vitscale.tune.kinds import TUNE_KINDS
from vitscale.tune.trainable import train_trial


def test_the_three_kinds_are_registered_in_order():
    assert list(STUDY_KINDS) == ["train", "benchmark", "comparison"]
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


@pytest.mark.parametrize("name", list(STUDY_KINDS))
def test_every_layer_has_an_entry_for_every_kind(name):
    assert {STUDY_RULES, TUNE_KINDS, PARENT_RUNS, ANALYSIS_KINDS} <= set(TABLES)
    assert missing_entries(name) == []
    check_complete(name)


def test_a_comparison_trains_in_phases_and_a_benchmark_measures_in_fresh_processes():
    comparison, train, bench = (TUNE_KINDS[n] for n in ("comparison", "train", "benchmark"))
    assert comparison.trial is train.trial is train_trial and bench.trial is bench_trial
    assert comparison.run is comparison.resume is run_comparison and train.run is not run_comparison
    assert train.reuse_workers and comparison.reuse_workers and not bench.reuse_workers
    assert study_kind("comparison").analysis_steps == study_kind("train").analysis_steps


def test_a_kind_registers_once():
    with pytest.raises(ValueError, match="'train' is registered twice"):
        register_kind(replace(STUDY_KINDS["train"], title="Again"))
    assert STUDY_KINDS["train"].title == "Training"
    with pytest.raises(KindError, match="'train': tune runner .* is registered twice"):
        TUNE_KINDS.register("train", TUNE_KINDS["train"])


def test_an_object_that_is_not_a_whole_study_kind_is_refused_in_one_line():
    fields = asdict(STUDY_KINDS["train"])
    fields.pop("points_noun")

    class Partial:
        pass

    partial = Partial()
    partial.__dict__.update(fields, name="partial")
    with pytest.raises(KindError) as missing:
        register_kind(partial)
    assert str(missing.value) == (
        "study kind 'partial' is not a StudyKind (vitscale.kinds.registry): points_noun (missing)"
    )
    with pytest.raises(KindError, match=r"analysis_steps \(list, not tuple\)"):
        register_kind(replace(STUDY_KINDS["train"], name="listed", analysis_steps=["aggregate_replicates"]))
    with pytest.raises(KindError, match=r"report_sections \(a tuple of str\)"):
        register_kind(replace(STUDY_KINDS["train"], name="numbered", report_sections=(1, 2)))
    assert set(STUDY_KINDS) == {"train", "benchmark", "comparison"}
    assert isinstance(KindData(**fields, points_noun="point"), type(STUDY_KINDS["train"]))


def test_a_missing_table_entry_is_one_line_naming_the_table_and_how_to_register():
    table = KindTable("probe behaviour (Probe)", "PROBES.register(name, Probe(...))")
    try:
        table.register("train", "an entry")
        with pytest.raises(KindError) as err:
            table["benchmark"]
        assert str(err.value) == (
            "study kind 'benchmark' has no probe behaviour (Probe); register one with "
            "PROBES.register(name, Probe(...))"
        )
        with pytest.raises(
            KindError, match=r"^study kind 'benchmark' is registered incompletely: it has no probe"
        ):
            check_complete("benchmark")
        assert "\n" not in str(err.value)
    finally:
        TABLES.remove(table)


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
