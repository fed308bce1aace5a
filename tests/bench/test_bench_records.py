"""The record schema: Parquet with exactly `schema()` (SCHEMA + the model's columns), strict JSON, and the table's ratios."""

from __future__ import annotations

import json
import math

import pyarrow.parquet as pq
import pytest

from vitscale.bench import records as rec
from vitscale.bench.config import BenchmarkConfig
from vitscale.bench.report import footnotes, ratios, tables


def _records(config):
    out = []
    for point, ips, mem in zip(
        config.configurations(), (100.0, 50.0, 300.0), (400.0, 900.0, 380.0), strict=True
    ):
        r = rec.blank_record(config, point, "cpu")
        r.update(
            status="ok",
            images_per_second=ips,
            latency_ms=2000.0 / ips,
            cpu_ms=1000.0 / ips,
            peak_memory_mb=mem,
            baseline_memory_mb=300.0,
            process_peak_rss_mb=300.0 + mem,
            memory_kind="rss_above_idle",
            flops_per_image=1e6,
            params=1000,
            latencies_ms=[1.0, 2.0],
            latency_spread=0.02,
            cpu_spread=0.01,
            cpu_wall_ratio=0.97,
        )
        out.append(r)
    out[1].update(
        status="out_of_memory",
        error="OutOfMemoryError: out of memory",
        images_per_second=None,
        latency_ms=float("nan"),
        peak_memory_mb=None,
        latencies_ms=None,
    )
    return out


def test_parquet_has_exactly_the_schema_and_the_config(tiny_config, tmp_path):
    config = tiny_config()
    path = rec.write_parquet(_records(config), tmp_path / "sub" / "bench.parquet", config)
    table = pq.read_table(path)
    assert table.schema.remove_metadata() == rec.schema()
    assert table.num_rows == 3
    assert json.loads(table.schema.metadata[rec.BENCHMARK_META]) == config.model_dump(mode="json")
    rows = table.to_pylist()
    assert [r["status"] for r in rows] == ["ok", "out_of_memory", "ok"]
    assert rows[1]["latency_ms"] is None  # NaN is written as null
    assert rows[2]["attention_backend"] is None and rows[0]["attention_backend"] == "sdpa"
    assert rows[0]["latencies_ms"] == [1.0, 2.0] and rows[0]["tokens"] == 4


def test_unknown_keys_are_dropped_and_json_is_strict(tiny_config):
    records = _records(tiny_config())
    records[0]["something_else"] = 1
    assert rec.to_table(records).schema == rec.schema()
    parsed = json.loads(rec.to_json(records))  # json.loads rejects nothing, so check for NaN by hand
    assert parsed[1]["latency_ms"] is None
    assert all(not (isinstance(v, float) and math.isnan(v)) for r in parsed for v in r.values())


def test_ratios_against_every_backend_and_failed_baselines(tiny_config):
    records = _records(tiny_config())
    rows = {r["baseline"]: r for r in ratios(records)}
    assert set(rows) == {"attention/sdpa", "attention/math"}
    assert rows["attention/sdpa"]["throughput"] == pytest.approx(3.0)
    assert rows["attention/sdpa"]["throughput_cpu"] == pytest.approx(3.0)
    assert rows["attention/sdpa"]["memory"] == pytest.approx(380 / 400)
    assert rows["attention/sdpa"]["throughput_verdict"] == "ahead"
    assert rows["attention/sdpa"]["throughput_margin"] == pytest.approx(0.04)  # both spreads added
    assert rows["attention/sdpa"]["memory_verdict"] == "ahead"  # 5 % leaner, beyond the 1 % floor
    assert rows["attention/math"]["throughput"] is None  # the baseline ran out of memory
    assert rows["attention/math"]["throughput_verdict"] == "undecided"
    main, against_math = tables(records)  # sdpa in the main table, math in a compact one
    headers = [c.header for c in main.columns]
    assert main.row_count == 3 and {"thr\n÷sdpa", "cpu\n÷sdpa", "cpu ms", "MB\ninf", "MB\ntrain"} <= set(
        headers
    )
    assert {"FLOP\nceil", "pool\nceil", "mem\ninf\n÷sdpa", "mem\ntrain\n÷sdpa"} <= set(headers)
    assert not any("math" in h for h in headers)
    assert against_math.row_count == 1  # the candidate only
    assert [c.header for c in against_math.columns][3:] == [
        "thr ÷math",
        "cpu ÷math",
        "mem inf ÷math",
        "mem train ÷math",
    ]
    assert any("peak RSS above idle" in note for note in footnotes(records))


def test_a_ratio_within_the_repeat_spread_reads_tied(tiny_config):
    records = _records(tiny_config())
    ssog = records[2]
    ssog.update(images_per_second=100.0 * 0.9999, latency_ms=20.002, cpu_ms=10.0, peak_memory_mb=400.0)
    rows = {r["baseline"]: r for r in ratios(records)}
    sdpa = rows["attention/sdpa"]
    assert sdpa["throughput"] == pytest.approx(0.9999) and sdpa["throughput_verdict"] == "tied"
    assert sdpa["memory_verdict"] == "tied" and sdpa["throughput_cpu_verdict"] == "tied"
    ssog["images_per_second"] = 100.0 * 1.03  # beyond the 1 % floor, inside the 4 % of the spreads
    assert {r["baseline"]: r for r in ratios(records)}["attention/sdpa"]["throughput_verdict"] == "tied"
    ssog["images_per_second"] = 100.0 * 1.05
    assert {r["baseline"]: r for r in ratios(records)}["attention/sdpa"]["throughput_verdict"] == "ahead"
    ssog["latency_spread"] = None  # one repeat: nothing to judge a difference by
    assert {r["baseline"]: r for r in ratios(records)}["attention/sdpa"]["throughput_verdict"] == "undecided"
    table = tables(records)[0]
    cells = [str(c) for col in table.columns for c in col._cells]
    assert "≈1.00×" in cells  # the memory tie, marked as one


def test_contended_timings_are_starred_and_named(tiny_config):
    records = _records(tiny_config())
    records[2]["cpu_wall_ratio"] = 0.16  # 16.7 ms wall against 2.65 ms of CPU time
    table = tables(records)[0]
    img_s = next(col for col in table.columns if col.header == "img/s")
    assert [str(c) for c in img_s._cells][2].endswith("*") and not str(img_s._cells[0]).endswith("*")
    ssog = {r["baseline"]: r for r in ratios(records)}["attention/sdpa"]
    assert ssog["throughput"] == pytest.approx(3.0) and ssog["throughput_verdict"] == "undecided"
    notes = footnotes(records)
    [note] = [n for n in notes if n.startswith("*: contended")]
    assert "ssog discrete 16 (cpu/wall 0.16 of 1 thread)" in note and "1 of 2" in note


def _with_pooling(config):
    """sdpa, math, pooling, ssog (configurations() order), every mode's memory measured."""
    records = []
    for point, ips, cpu, flops, mem in zip(
        config.configurations(),
        (100.0, 50.0, 300.0, 150.0),
        (10.0, 20.0, 4.0, 5.0),
        (4e6, 4e6, 1e6, 2e6),
        ((100.0, 400.0), (200.0, 900.0), (40.0, 100.0), (50.0, 200.0)),
        strict=True,
    ):
        r = rec.blank_record(config, point, "cpu")
        r.update(
            status="ok",
            images_per_second=ips,
            latency_ms=2000.0 / ips,
            cpu_ms=cpu,
            inference_memory_mb=mem[0],
            train_memory_mb=mem[1],
            peak_memory_mb=mem[0],
            baseline_memory_mb=300.0,
            memory_kind="rss_above_idle",
            flops_per_image=flops,
            latency_spread=0.02,
            cpu_spread=0.01,
            cpu_wall_ratio=0.97,
            threads=1,
        )
        records.append(r)
    return records


def test_both_ceilings_and_both_modes_memory_beside_the_ratios(tiny_config):
    config = tiny_config(mixers=["attention", "pooling", "ssog"])
    records = _with_pooling(config)
    rows = {(r["candidate"], r["baseline"]): r for r in ratios(records)}
    ssog = rows[("ssog", "attention/sdpa")]
    assert ssog["throughput"] == pytest.approx(1.5) and ssog["throughput_cpu"] == pytest.approx(2.0)
    assert ssog["flop_ceiling"] == pytest.approx(2.0)  # 4 MFLOP of attention / 2 of SSoG
    assert ssog["pool_ceiling"] == pytest.approx(3.0) and ssog["pool_ceiling_cpu"] == pytest.approx(2.5)
    assert ssog["memory_inference"] == pytest.approx(0.5) and ssog["memory_train"] == pytest.approx(0.5)
    math = rows[("ssog", "attention/math")]
    assert math["pool_ceiling"] == pytest.approx(6.0) and math["memory_train"] == pytest.approx(200 / 900)
    main = tables(records)[0]
    column = {str(c.header): [str(v) for v in c._cells] for c in main.columns}
    ssog_row = column["series"].index("ssog")
    assert column["FLOP\nceil"][ssog_row] == "2.00×"
    assert column["pool\nceil"][ssog_row] == "2.50×"  # CPU records: pooling's CPU-time ratio
    assert column["MB\ntrain"][ssog_row] == "200" and column["mem\ntrain\n÷sdpa"][ssog_row] == "0.50×"
    assert not any(n.startswith("pool ceil —") for n in footnotes(records))


def test_without_pooling_the_ceiling_says_it_was_not_measured(tiny_config):
    config = tiny_config(mixers=["attention", "pooling", "ssog"])
    records = [r for r in _with_pooling(config) if r["mixer"] != "pooling"]
    [row] = [r for r in ratios(records) if r["baseline"] == "attention/sdpa"]
    assert row["pool_ceiling"] is None and row["flop_ceiling"] == pytest.approx(2.0)
    [note] = [n for n in footnotes(records) if n.startswith("pool ceil —")]
    assert "not measured in 1 of 1 cells" in note and "--mixers" in note


def test_records_from_before_both_modes_keep_their_peak_in_their_mode(tiny_config):
    records = _records(tiny_config())  # peak_memory_mb only, an inference sweep
    sdpa = ratios(records)[0]
    assert sdpa["memory_inference"] == pytest.approx(380 / 400) and sdpa["memory_train"] is None


def test_the_main_table_fits_120_columns_and_the_default_measures_pooling(tiny_config):
    from rich.console import Console

    assert "pooling" in BenchmarkConfig().mixers  # so the ceiling is there unless a sweep leaves it out
    config = tiny_config(mixers=["attention", "pooling", "ssog"], regimes=["ode"])
    records = _with_pooling(config)
    for r in records:
        r["nfe"], r["cpu_ms"] = 24, 1234.5
    console = Console(width=120, record=True)
    for table in tables(records):
        console.print(table)
    text = console.export_text()
    assert "…" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= 120
    assert "attention/sdpa" in text and "1,234" in text


def test_a_sweep_without_attention_still_shows_what_it_measured(tiny_config):
    config = tiny_config(mixers=["attention", "pooling", "ssog"])
    records = [r for r in _with_pooling(config) if r["mixer"] != "attention"]
    [table] = tables(records)
    assert table.row_count == 2 and "img/s" in [c.header for c in table.columns]
    assert not any("÷" in str(c.header) for c in table.columns)
