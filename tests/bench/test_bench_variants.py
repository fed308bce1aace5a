"""Variants of one model timed side by side: `dtype`, `batch_size` and `compile` as lists.

A scalar stays valid (a one-element list); every variant of a regime x resolution is timed
round-robin with the others; records, MLflow params and run names carry each configuration's own
values; the report divides each series' variants by the baseline variant, per image.
"""

from __future__ import annotations

import json

import pytest
import torch
from pydantic import ValidationError
from rich.console import Console

from vitscale.bench import measure, paired, runner
from vitscale.bench import records as rec
from vitscale.bench.config import Variant
from vitscale.bench.fields import bench_params, run_name
from vitscale.bench.report import footnotes, tables, variant_ratios
from vitscale.cli import main
from vitscale.validation import error_lines


def test_a_scalar_is_a_one_element_list_and_keeps_its_form(tiny_config):
    config = tiny_config()
    assert (config.dtypes, config.batch_sizes, config.compiles) == (["float32"], [2], [False])
    assert config.variants() == [Variant("float32", 2, False)] and config.varying() == ()
    dumped = config.model_dump(mode="json")  # a study written before lists keeps its spec (and hash)
    assert (dumped["dtype"], dumped["batch_size"], dumped["compile"]) == ("float32", 2, False)
    listed = tiny_config(dtype=["float32", "bfloat16"], batch_size=[2, 8], compile=[True, False])
    assert listed.varying() == ("dtype", "batch_size", "compile") and len(listed.variants()) == 8
    assert listed.baseline_variant() == Variant("float32", 2, False)  # eager, wherever it is listed
    assert tiny_config(compile=True).baseline_variant() == Variant("float32", 2, True)


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"dtype": "float16"}, "dtype: 'float16' is not float32 | bfloat16"),
        ({"dtype": ["float32", "float16"]}, "dtype: 'float16' is not float32 | bfloat16"),
        ({"dtype": ["float32", "float32"]}, "dtype: a value is repeated"),
        ({"batch_size": [8, 0]}, "batch_size: 0 is not a whole number >= 1"),
        ({"batch_size": []}, "batch_size: give at least one value"),
        ({"compile": ["yes"]}, "compile: 'yes' is not true | false"),
    ],
)
def test_a_bad_value_is_one_line_naming_its_key(tiny_config, values, line):
    with pytest.raises(ValidationError) as info:
        tiny_config(**values)
    assert error_lines(info.value) == [line]


def test_configurations_keep_a_cell_together_and_a_series_variants_side_by_side(tiny_config):
    config = tiny_config(
        regimes=["discrete", "looped"],
        attention_backends=["sdpa"],
        dtype=["float32", "bfloat16"],
        batch_size=[2, 4],
        compile=[False, True],
    )
    points = config.configurations()
    assert len(points) == 2 * 2 * 8  # regimes x (sdpa, ssog) x variants
    assert [len(cell) for cell in runner.cells(points)] == [16, 16]  # every variant in its cell
    first = [(p["mixer"], p["dtype"], p["batch_size"], p["compile"]) for p in points[:8]]
    assert first == [
        ("attention", "float32", 2, False),
        ("attention", "float32", 2, True),  # a compiled configuration beside its eager twin
        ("attention", "float32", 4, False),
        ("attention", "float32", 4, True),
        ("attention", "bfloat16", 2, False),
        ("attention", "bfloat16", 2, True),
        ("attention", "bfloat16", 4, False),
        ("attention", "bfloat16", 4, True),
    ]
    assert points[8]["mixer"] == "ssog" and points[16]["regime"] == "looped"
    # a paired trial's references run its own variant
    bf16 = next(p for p in points if p["mixer"] == "ssog" and p["dtype"] == "bfloat16" and p["compile"])
    [ref] = paired.references(config, bf16)
    assert (ref["mixer"], ref["dtype"], ref["batch_size"], ref["compile"]) == (
        "attention",
        "bfloat16",
        2,
        True,
    )


def test_records_params_and_run_names_carry_the_configurations_own_variant(tiny_config):
    config = tiny_config(dtype=["float32", "bfloat16"], batch_size=[2, 4], compile=[False, True])
    point = {**config.configurations()[-1]}  # ssog, bfloat16, batch 4, compiled
    record = rec.blank_record(config, point, "cpu")
    assert (record["dtype"], record["batch_size"], record["compile"]) == ("bfloat16", 4, True)
    assert record["compile_mode"] == "default"
    params = bench_params(config, point, 0)
    assert (params["bench.dtype"], params["bench.batch_size"], params["bench.compile"]) == (
        "bfloat16",
        4,
        True,
    )
    assert run_name(point, 0, config) == "ssog · discrete · r16 · bfloat16 · b4 · compile=True · s0"
    assert run_name(point, 0, tiny_config()) == "ssog · discrete · r16 · s0"  # nothing varies
    # a point planned before variants existed runs the config's first values
    old = {k: point[k] for k in ("mixer", "regime", "resolution", "attention_backend")}
    assert config.variant(old) == Variant("float32", 2, False)


def test_compiled_variants_report_their_first_call_and_get_a_warmup(tiny_config, counting_model, monkeypatch):
    compiled = []
    monkeypatch.setattr(torch, "compile", lambda model, **options: compiled.append(options) or model)
    config = tiny_config(mixers=["ssog"], compile=[False, True], batch_size=[2, 3], warmup=0, repeats=2)
    records = measure.measure_interleaved(
        config, config.configurations(), build_model=lambda cfg: counting_model(cfg.num_classes)
    )
    assert [(r["batch_size"], r["compile"], r["status"]) for r in records] == [
        (2, False, "ok"),
        (2, True, "ok"),
        (3, False, "ok"),
        (3, True, "ok"),
    ]
    assert compiled == [{"mode": None, "dynamic": False}] * 2  # static shapes: one graph per batch size
    for r in records:
        assert (r["compile_seconds"] is not None) == r["compile"] and r["warmup"] == int(r["compile"])
        assert r["images_per_second"] == pytest.approx(r["batch_size"] / (r["latency_ms"] / 1e3))


def test_a_compiled_configuration_shares_its_eager_twins_memory(tiny_config, monkeypatch):
    config = tiny_config(mixers=["ssog"], compile=[False, True], dtype=["float32", "bfloat16"])
    memory_runs = []

    def memory(config, point, device, timed):
        memory_runs.append(point)
        record = rec.blank_record(config, point, device)
        record.update(status="ok", train_memory_mb=10.0 + len(memory_runs))
        return record

    def timing(config, points, device):
        return [
            {**rec.blank_record(config, p, device), "status": "ok", "timing": "interleaved"} for p in points
        ], ""

    monkeypatch.setattr(runner, "run_isolated", memory)
    monkeypatch.setattr(runner, "run_isolated_cell", timing)
    records = runner.measure_cell_isolated(config, config.configurations())
    assert [p["compile"] for p in memory_runs] == [False, False]  # one eager worker per dtype
    assert [(r["dtype"], r["compile"], r["train_memory_mb"]) for r in records] == [
        ("float32", False, 11.0),
        ("float32", True, 11.0),
        ("bfloat16", False, 12.0),
        ("bfloat16", True, 12.0),
    ]
    assert records[1]["compile_mode"] == "default" and records[0]["compile_mode"] is None


def _timed(config, cpu_ms_per_image):
    """Records of every configuration: images/s and CPU ms per image from `cpu_ms_per_image(point)`."""
    out = []
    for point in config.configurations():
        per_image = cpu_ms_per_image(point)
        r = rec.blank_record(config, point, "cpu")
        r.update(
            status="ok",
            images_per_second=1e3 / per_image,
            latency_ms=per_image * point["batch_size"],
            cpu_ms=per_image * point["batch_size"],
            latency_spread=0.01,
            cpu_spread=0.01,
            cpu_wall_ratio=1.0,
            threads=1,
            inference_memory_mb=10.0,
            train_memory_mb=20.0,
            memory_kind="rss_above_idle",
            baseline_memory_mb=300.0,
            flops_per_image=1e6,
            compile_seconds=42.0 if point["compile"] else None,
        )
        out.append(r)
    return out


def test_the_variant_table_divides_each_series_by_the_named_baseline_per_image(tiny_config):
    config = tiny_config(mixers=["attention", "ssog"], attention_backends=["sdpa"])
    config = config.model_copy(
        update={"dtype": ["float32", "bfloat16"], "batch_size": [2, 8], "mode": "train"}
    )
    # bfloat16 halves the time per image, batch 8 takes a quarter off; ssog is 1.5x faster than attention
    speed = {"attention": 1.0, "ssog": 1.5}

    def per_image(p):
        return (
            2.0
            / speed[p["mixer"]]
            * (0.5 if p["dtype"] == "bfloat16" else 1)
            * (0.75 if p["batch_size"] == 8 else 1)
        )

    records = _timed(config, per_image)
    rows = {(r["series"], r["variant"]): r for r in variant_ratios(records)}
    assert rows[("ssog", Variant("float32", 2, False))]["throughput"] is None  # the baseline itself
    bf16_b8 = rows[("ssog", Variant("bfloat16", 8, False))]
    assert bf16_b8["throughput"] == pytest.approx(1 / 0.375) and bf16_b8["throughput_verdict"] == "ahead"
    assert bf16_b8["throughput_cpu"] == pytest.approx(1 / 0.375)  # per image, though batches differ
    console = Console(width=120, record=True)
    for table in tables(records):
        console.print(table)
    text = console.export_text()
    assert "variants · ÷ float32 b2 eager (base)" in text
    assert "discrete · ÷ attention/sdpa · batch 8 · timed: train · bfloat16 · cpu" in text  # one per variant
    variant_lines = text[text.index("variants ·") :].splitlines()
    header = next(line for line in variant_lines if "series" in line)
    assert header.split()[:5] == ["regime", "px", "series", "dtype", "batch"]
    [ssog_bf16_b8] = [ln for ln in variant_lines if ln.split()[:2] == ["bfloat16", "8"]][1:]
    assert ssog_bf16_b8.split()[-2:] == ["2.67×", "2.67×"]
    main_ssog = [ln for ln in text[: text.index("variants ·")].splitlines() if ln.strip().startswith("ssog")]
    assert len(main_ssog) == 4 and all("1.50×" in ln for ln in main_ssog)  # ssog ÷ sdpa within each variant
    assert "…" not in text and max(len(line.rstrip()) for line in text.splitlines()) <= 120
    assert any(note.startswith("variants ÷ float32 b2 eager") for note in footnotes(records))


def test_compile_seconds_are_shown_beside_compiled_configurations(tiny_config):
    config = tiny_config(mixers=["ssog"], compile=[False, True], regimes=["ode"])
    records = _timed(config, lambda p: 1.0 if p["compile"] else 2.0)
    console = Console(width=120, record=True)
    for table in tables(records):
        console.print(table)
    text = console.export_text()
    assert "variants · ÷ float32 b2 eager (base)" in text and "comp" in text
    [compiled] = [ln for ln in text[text.index("variants ·") :].splitlines() if ln.split()[-3:-2] == ["42.0"]]
    assert compiled.split()[-2:] == ["2.00×", "2.00×"]
    assert any("comp s: wall seconds" in note for note in footnotes(records))


@pytest.mark.slow
def test_a_tiny_sweep_times_two_dtypes_and_two_batch_sizes_side_by_side(tmp_path, capsys):
    lines = tmp_path / "bench.jsonl"
    main(
        [
            "bench",
            *("--mixers", "ssog", "--regimes", "discrete", "--resolutions", "16", "--mode", "train"),
            *("--width", "16", "--depth", "1", "--heads", "2", "--patch-size", "8", "--num-classes", "5"),
            *("--dtype", "float32,bfloat16", "--batch-size", "2,4"),
            *("--warmup", "1", "--repeats", "2", "--threads", "1", "--device", "cpu", "--jsonl", str(lines)),
        ]
    )
    out = capsys.readouterr().out
    records = [json.loads(line) for line in lines.read_text().splitlines()]
    assert [(r["dtype"], r["batch_size"], r["compile"]) for r in records] == [
        ("float32", 2, False),
        ("float32", 4, False),
        ("bfloat16", 2, False),
        ("bfloat16", 4, False),
    ]
    for r in records:
        assert r["status"] == "ok", r["error"]
        assert r["timing"] == "interleaved" and r["mode"] == "train" and r["compile_seconds"] is None
        assert r["train_memory_mb"] > 0 and len(r["latencies_ms"]) == 2
        assert r["images_per_second"] == pytest.approx(r["batch_size"] / (r["latency_ms"] / 1e3))
    assert "variants · ÷ float32 b2 eager (base)" in out and "bfloat16" in out


def test_mlflow_logs_each_runs_own_variant_and_analyze_splits_by_it(tiny_config, tmp_path):
    from mlflow import MlflowClient

    from vitscale.analysis.pipeline import analyze
    from vitscale.tracking import layout
    from vitscale.tune.bench_log import MlflowBenchLog

    config = tiny_config(attention_backends=["sdpa"], dtype=["float32", "bfloat16"])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = MlflowBenchLog(config, uri, "bench-variants")
    for record in _timed(config, lambda p: 1.0 if p["mixer"] == "ssog" else 2.0):
        log.log(record)
    log.finish()
    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("bench-variants")
    children = client.search_runs([exp.experiment_id], f"tags.`{layout.ROLE}` = 'trial'")
    seen = {(c.data.params["model.mixer"], c.data.params["bench.dtype"]): c for c in children}
    assert set(seen) == {(m, d) for m in ("attention", "ssog") for d in ("float32", "bfloat16")}
    assert seen[("ssog", "bfloat16")].info.run_name == "ssog · discrete · r16 · bfloat16 · s0"
    assert len({c.data.tags[layout.CONFIG_KEY] for c in children}) == 4
    result = analyze("bench-variants", uri, tmp_path / "report", log_artifacts=False)
    settings = set(result.aggregates.column("setting").to_pylist())
    assert settings == {"bench.dtype=float32", "bench.dtype=bfloat16"}  # one curve per variant
