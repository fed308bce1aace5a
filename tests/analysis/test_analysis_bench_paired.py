"""A benchmark study's throughput ratios come from the candidate's own trial, where it timed the
attention configurations beside it (bench.paired), not from two trials timed minutes apart."""

from __future__ import annotations

import pytest
from analysis_stores import analyze_fake_bench, fake_bench_runs

STUDY = "bench-paired"
# The trials' own images/s drifted: ssog's trials ran while the machine was fast, so the series'
# means put it 1.2x ahead of attention/sdpa; timed side by side in its trials it was 0.8x behind.
THROUGHPUT = {("attention", "sdpa"): (1000.0, 500.0), ("ssog", None): (1200.0, 600.0)}
PAIRED = {32: 0.80, 64: 0.79}


def metrics(mixer: str, res: int, ips: float) -> dict:
    out = {
        "images_per_second": ips,
        "latency_ms": 2000.0 / ips,
        "latency_spread": 0.02,
        "cpu_ms": 2000.0 / ips,
        "cpu_wall_ratio": 0.99,
        "peak_memory_mb": 20.0,
        "tokens": (res // 8) ** 2,
        "flops_per_image": 1e5,
    }
    if mixer == "ssog":
        out.update(paired_ratio_sdpa=PAIRED[res], paired_cpu_ratio_sdpa=PAIRED[res], paired_margin_sdpa=0.03)
    return out


@pytest.fixture(scope="module")
def paired(tmp_path_factory):
    return analyze_fake_bench(
        tmp_path_factory.mktemp("paired"), STUDY, fake_bench_runs(THROUGHPUT, (32, 64), {}, metrics)
    )


def test_the_crossover_reads_the_ratio_timed_side_by_side(paired):
    res, _ = paired
    cross = {(c.candidate, c.baseline, c.metric): c for c in res.crossovers}
    ssog = cross[("ssog", "attention/sdpa", "images_per_second")]
    assert ssog.status == "behind_throughout" and ssog.ratio_at_largest == pytest.approx(0.79)
    assert ssog.margin_at_largest == pytest.approx(0.03) and ssog.verdicts == "32 behind · 64 behind"


def test_the_report_table_shows_the_paired_ratio_and_says_so(paired):
    _, report = paired
    assert "timed side by side in the candidate's own trials" in report
    row = next(r for r in report.splitlines() if r.startswith("| discrete | 64 |"))
    assert "0.79×" in row and "1.20×" not in row
