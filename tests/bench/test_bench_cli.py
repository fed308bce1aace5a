"""`vitscale bench`: flags -> BenchmarkConfig (bad values: one line, exit 2), outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from vitscale.cli import main
from vitscale.tracking import layout

QUICKSTART = Path(__file__).resolve().parents[2] / "studies" / "quickstart.yaml"

SMALL = [
    "--width",
    "16",
    "--depth",
    "1",
    "--heads",
    "2",
    "--patch-size",
    "8",
    "--batch-size",
    "2",
    "--warmup",
    "0",
    "--repeats",
    "1",
    "--threads",
    "1",
    "--device",
    "cpu",
    "--num-classes",
    "5",
]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--heads", "5"], "error: heads: 5 does not divide width 192"),
        (["--resolutions", "224,3x"], "error: --resolutions: '224,3x' is not a comma list of ints"),
        (["--resolutions", "100"], "error: resolutions: [100] not divisible by patch_size 16"),
        (["--mixers", "attention,mamba"], "error: mixers: unknown 'mamba'"),
        (["--mode", "serve"], "error: mode: Input should be 'inference' or 'train'"),
        (["--attention-backend", "flash"], "error: attention_backends[0]: Input should be 'sdpa' or 'math'"),
        (["--ode-solver", "leapfrog"], "error: ode.solver: Input should be"),
        (["--study", str(QUICKSTART)], f"error: --study: {QUICKSTART} is a train study"),
        (["--dtype", "float32,float16"], "error: dtype: 'float16' is not float32 | bfloat16"),
        (["--batch-size", "128,5x"], "error: --batch-size: '128,5x' is not a comma list of ints"),
        (["--batch-size", "0"], "error: batch_size: 0 is not a whole number >= 1"),
        (["--compiles", "false,maybe"], "error: --compiles: 'false,maybe' is not a comma list of false,true"),
        (["--compile", "--compiles", "false,true"], "error: --compiles: give --compile/--no-compile or"),
    ],
)
def test_bad_values_are_one_line_exit_2(args, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2
    assert len(err) == 1 and err[0].startswith(message), err


def test_a_sweep_prints_json_writes_parquet_and_logs_mlflow(tmp_path, capsys):
    out, uri = tmp_path / "bench.parquet", f"sqlite:///{tmp_path / 'mlflow.db'}"
    lines = tmp_path / "bench.jsonl"
    main(
        [
            "bench",
            "--mixers",
            "ssog",
            "--regimes",
            "looped",
            "--resolutions",
            "16",
            *SMALL,
            "--json",
            "--out",
            str(out),
            "--tracking-uri",
            uri,
            "--name",
            "cli-bench",
            "--jsonl",
            str(lines),
        ]
    )
    captured = capsys.readouterr()
    [record] = json.loads(captured.out)
    assert record["status"] == "ok", record["error"]
    assert record["mixer"] == "ssog" and record["regime"] == "looped" and record["device"] == "cpu"
    assert record["memory_kind"] == "rss_above_idle" and record["timing"] == "interleaved"
    assert record["repeats"] == 1 and len(record["latencies_ms"]) == 1
    # the configuration's own peak: the whole worker's minus its idle peak before the model existed
    assert record["process_peak_rss_mb"] == pytest.approx(
        record["baseline_memory_mb"] + record["peak_memory_mb"]
    )
    assert 0 < record["peak_memory_mb"] < record["baseline_memory_mb"]
    assert record["latency_spread"] is None  # one repeat: no spread, so no ratio can be called
    assert record["cpu_wall_ratio"] > 0
    assert pq.read_table(out).num_rows == 1
    assert [json.loads(line) for line in lines.read_text().splitlines()] == [record]
    assert "vitscale analyze cli-bench" in captured.err.replace("\n", " ")
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("cli-bench")
    [child] = client.search_runs([exp.experiment_id], f"tags.`{layout.ROLE}` = 'trial'")
    assert child.data.params["bench.device"] == "cpu" and child.data.params["bench.threads"] == "1"
    assert child.data.metrics["baseline_memory_mb"] == pytest.approx(record["baseline_memory_mb"])
    assert child.data.metrics["cpu_wall_ratio"] == pytest.approx(record["cpu_wall_ratio"])


def test_bad_study_name_fails_before_measuring(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", *SMALL, "--tracking-uri", "sqlite:///unused.db", "--name", "Bad Name"])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith("error: name: 'Bad Name': use lowercase letters")


def test_the_table_puts_both_ceilings_and_both_modes_memory_beside_sdpa(tmp_path, capsys):
    lines = tmp_path / "bench.jsonl"
    args = ["--mixers", "attention,ssog,pooling", "--regimes", "discrete", "--resolutions", "16"]
    main(["bench", *args, *SMALL, "--attention-backend", "sdpa,math", "--jsonl", str(lines)])
    out = capsys.readouterr().out
    records = {
        (r["mixer"], r["attention_backend"]): r for r in map(json.loads, lines.read_text().splitlines())
    }
    assert len(records) == 4 and all(r["status"] == "ok" for r in records.values()), records
    for r in records.values():  # each mode's peak above the idle worker, measured alone
        assert r["inference_memory_mb"] > 0 and r["train_memory_mb"] > 0 and r["timing"] == "interleaved"
    sdpa, pool, ssog = records[("attention", "sdpa")], records[("pooling", None)], records[("ssog", None)]
    [row] = [ln for ln in out.splitlines() if ln.split()[:1] == ["ssog"]][:1]
    cells = row.split()
    flop_ceiling = f"{sdpa['flops_per_image'] / ssog['flops_per_image']:.2f}×"
    pool_ceiling = f"{sdpa['cpu_ms'] / pool['cpu_ms']:.2f}×"
    assert cells[-4:-2] == [flop_ceiling, pool_ceiling], row
    assert (
        f"{ssog['train_memory_mb']:,.0f}" in cells and "÷ attention/sdpa" in out and "÷ attention/math" in out
    )
    assert "…" not in out  # without a terminal the table is rendered whole, no cell cut (cli.console)
    assert "pool ceil:" in " ".join(out.split())
