"""A benchmark report claims only what its measurements carry: ratios beyond the repeats' spread,
one exponent row per estimate (and none that fakes a fit from two points), contended timings
flagged, memory above the idle worker, and no training-study wording."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_stores import analyze_fake_bench, fake_bench_runs

STUDY = "bench-claims"
# images/s per series at 32 and 64 px: fourier behind then ahead (beyond the ±4 % margin), pooling
# level with sdpa to a ten-thousandth (the 0.9999× the old report called "ahead"), ssog behind then
# ahead too, but its 64 px timing was contended.
THROUGHPUT = {
    ("attention", "sdpa"): (1000.0, 500.0),
    ("attention", "math"): (900.0, 400.0),
    ("ssog", None): (800.0, 600.0),
    ("pooling", None): (1000.0 * 0.9999, 500.0 * 0.9999),
    ("fourier", None): (900.0, 550.0),
}
IDLE_MB = 394.0


def metrics(mixer: str, res: int, ips: float) -> dict:
    above = 10.0 + (res / 8) ** 2 * (0.05 if mixer == "attention" else 0.02)
    return {
        "images_per_second": ips,
        "latency_ms": 2000.0 / ips,
        "latency_spread": 0.02,
        "cpu_ms": 2000.0 / ips,
        # ssog at 64 px shared its cores: 16.7 ms wall against 2.65 ms of CPU time
        "cpu_wall_ratio": 0.16 if (mixer, res) == ("ssog", 64) else 0.98,
        "peak_memory_mb": above,
        "baseline_memory_mb": IDLE_MB,
        "process_peak_rss_mb": IDLE_MB + above,
        "tokens": (res // 8) ** 2,
        "flops_per_image": 1e5 * (res // 8) ** (2 if mixer == "attention" else 1.5),
        "params": 3.5e4,
    }


def bench_runs() -> list:
    params = {
        "model.width": 32,
        "model.depth": 2,
        "model.heads": 2,
        "model.patch_size": 8,
        "bench.threads": 1,
    }
    return fake_bench_runs(THROUGHPUT, (32, 64), params, metrics)


@pytest.fixture(scope="module")
def claims(tmp_path_factory):
    return analyze_fake_bench(tmp_path_factory.mktemp("claims"), STUDY, bench_runs())


def test_a_ratio_within_the_margin_is_a_tie_not_a_lead(claims):
    res, report = claims
    cross = {(c.candidate, c.baseline, c.metric): c for c in res.crossovers}
    tie = cross[("pooling", "attention/sdpa", "images_per_second")]
    assert tie.ratio_at_largest == pytest.approx(0.9999) and tie.status == "tied_throughout"
    assert tie.margin_at_largest == pytest.approx(0.04) and tie.verdicts == "32 tied · 64 tied"
    line = next(
        row for row in report.splitlines() if row.startswith("| discrete | — | pooling | attention/sdpa |")
    )
    assert "tied at every resolution" in line and "1.00× ±4 % at 64" in line and "ahead" not in line
    crossing = cross[("fourier", "attention/sdpa", "images_per_second")]
    assert crossing.status == "crosses" and (crossing.below, crossing.above) == (32, 64)
    assert "32 behind · 64 ahead" in report
    # ssog's 1.2x at 64 px came from a contended timing: no claim either way
    contended = cross[("ssog", "attention/sdpa", "images_per_second")]
    assert contended.status == "undecided" and contended.verdicts == "32 behind · 64 undecided"


def test_memory_is_above_the_idle_worker(claims):
    res, report = claims
    assert "attention/sdpa MB above idle" in report and "peak memory in MB above the idle worker" in report
    lean = {(c.candidate, c.baseline): c for c in res.crossovers if c.metric == "peak_memory_mb"}
    # 30.5 MB above idle against 61.2 MB: half, where whole-process RSS read 0.93×
    assert lean[("ssog", "attention/sdpa")].ratio_at_largest == pytest.approx(
        (10 + 64 * 0.02) / (10 + 64 * 0.05)
    )


def test_contended_timings_are_flagged(claims):
    _, report = claims
    assert "## Contended timings" in report
    assert "1 of 10 CPU timings were contended" in report and "ssog discrete 64 (0.16)" in report
    row = next(r for r in report.splitlines() if r.startswith("| discrete | 64 |"))
    assert "600*" in row  # the contended ssog throughput is starred in the table


def test_two_resolutions_give_one_exponent_row_without_a_fit_quality(claims):
    res, report = claims
    keys = [(e["series"], e["regime"], e["setting"], e["quantity"]) for e in res.cost_exponents]
    assert len(keys) == len(set(keys)) == 5 * 3  # series x (FLOPs, mixer FLOPs, seconds), once each
    assert {e["method"] for e in res.cost_exponents} == {"two_points"}
    assert all(e["r2"] is None and e["ci"] is None for e in res.cost_exponents)
    rows = [r for r in report.splitlines() if "through the only two resolutions (no fit)" in r]
    assert len(rows) == 15 and all(r.split("|")[7].strip() == "—" for r in rows)  # r² column


def test_no_training_wording_in_a_benchmark_report(claims):
    _, report = claims
    for phrase in ("did not train", "did-not-train", "stopped early", "Did-not-train", "trained"):
        assert phrase not in report, phrase
    assert "10 trial runs: 10 measured, 0 failed" in report
    assert "## Failed trials" in report and "None: every configuration was measured." in report


def test_the_bench_figures_are_drawn(claims):
    res, _ = claims
    names = {Path(p).name for p in res.figure_paths}
    assert {"throughput_vs_resolution.png", "memory_vs_resolution.png", "time_vs_tokens.png"} <= names
