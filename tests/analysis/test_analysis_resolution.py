"""Accuracy at resolution in `vitscale analyze`: per arm and side the logged top-1 with its CI, the
paired Δ against the reference at each side judged on seeds and images, the throughput of the
benchmark study named in the spec, the Pareto set, the figures, and an offline redraw."""

from __future__ import annotations

import math

import numpy as np
import pyarrow.csv as pacsv
import pytest
from resolution_store import (
    RESOLUTION_BENCH,
    RESOLUTION_STUDY,
    SIDES,
    bench_images_per_second,
    write_resolution_bench,
    write_resolution_study,
)

from vitscale.analysis.pipeline import analyze
from vitscale.tracking.layout import arm_key


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("resolution")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    logged = write_resolution_study(uri, root / "artifacts_study")
    write_resolution_bench(uri, root / "artifacts_bench")
    return {"uri": uri, "logged": logged}


@pytest.fixture(scope="module")
def result(store, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return analyze(RESOLUTION_STUDY, store["uri"], out, n_boot=0, log_artifacts=False)


def _point(result, mixer: str, sides: list[int], side: int):
    arm = arm_key({"model.mixer": mixer, "data.train_resolutions": sides})
    return next(p for p in result.resolution_points if p.arm == arm and p.resolution == side)


def test_each_arm_at_each_side_is_the_mean_of_its_logged_seeds(result, store):
    assert len(result.resolution_points) == 4 * len(SIDES)
    for p in result.resolution_points:
        values = list(store["logged"][(p.arm, p.resolution)].values())
        assert p.test[0] == pytest.approx(np.mean(values))
        assert p.test[2] == 3 and math.isfinite(p.test[1])
        assert p.tokens == (p.resolution // 4) ** 2
    assert _point(result, "attention", [16, 24, 32], 32).trained == "16+24+32"
    assert _point(result, "attention", [16], 32).trained == "16"


def test_the_delta_at_each_side_pairs_seeds_and_images_against_the_reference(result, store):
    ssog = _point(result, "ssog", [16], 24)
    ref = arm_key({"model.mixer": "attention", "data.train_resolutions": [16]})
    assert ssog.reference == ref
    cand, base = store["logged"][(ssog.arm, 24)], store["logged"][(ref, 24)]
    assert ssog.judgement.t.mean == pytest.approx(np.mean([cand[s] - base[s] for s in cand]))
    assert ssog.judgement.boot is not None and ssog.judgement.boot.n_images == 800
    assert ssog.judgement.boot.mean == pytest.approx(ssog.judgement.t.mean, abs=1e-9)
    family = {p.judgement.family for p in result.resolution_points if p.judgement}
    assert family == {2 * len(SIDES)}  # one Holm family: every (arm, side) comparison
    assert _point(result, "attention", [16], 16).judgement is None  # the reference has no Δ


def test_throughput_comes_from_the_named_benchmark_and_the_front_is_the_non_dominated_set(result):
    assert result.throughput_from == RESOLUTION_BENCH
    points = result.resolution_points
    for p in points:
        assert p.throughput == pytest.approx(bench_images_per_second(p.mixer, p.resolution))
    for p in points:
        dominated = any(
            q.test[0] >= p.test[0]
            and q.throughput >= p.throughput
            and (q.test[0], q.throughput) != (p.test[0], p.throughput)
            for q in points
        )
        assert p.on_front == (not dominated), (p.arm, p.resolution)
    assert any(p.on_front for p in points)


def test_the_report_csv_and_figures_show_it(result):
    text = result.report_path.read_text()
    assert "## Accuracy at each evaluation resolution" in text and RESOLUTION_BENCH in text
    rows = pacsv.read_csv(result.out_dir / "resolution.csv").to_pylist()
    assert len(rows) == 12 and sum(r["on_front"] for r in rows) == sum(
        p.on_front for p in result.resolution_points
    )
    names = {p.name for p in result.figure_paths}
    assert {"accuracy_vs_resolution.png", "accuracy_throughput_resolution.png"} <= names


def test_an_offline_redraw_gives_the_same_table(result, tmp_path):
    again = analyze(RESOLUTION_STUDY, None, tmp_path, from_parquet=result.runs_path, n_boot=0)
    assert all(p.throughput is not None for p in again.resolution_points)  # throughput.parquet beside
    first = pacsv.read_csv(result.out_dir / "resolution.csv")
    assert pacsv.read_csv(tmp_path / "resolution.csv").equals(first)


def test_without_a_benchmark_the_report_says_how_to_get_the_front(store, tmp_path):
    res = analyze(
        RESOLUTION_STUDY,
        store["uri"],
        tmp_path,
        n_boot=0,
        log_artifacts=False,
        throughput_from="no-such-bench",
    )
    assert all(p.throughput is None for p in res.resolution_points)
    assert "no-such-bench" in res.throughput_note
    assert "accuracy_throughput_resolution.png" not in {p.name for p in res.figure_paths}
    assert "throughput_from" in res.report_path.read_text()
