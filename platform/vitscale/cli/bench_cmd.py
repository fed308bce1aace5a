"""`vitscale bench`: throughput, latency, peak memory and FLOPs of mixers versus resolution.

Flags left out keep the BenchmarkConfig defaults (or those of `--study FILE`'s `benchmark:`
block); list flags take commas (`--resolutions 224,384`). The model flags are the ones every
command shares (`--width`, `--ssog-num-gaussians`, `--ode-solver`, ...), generated from ModelConfig;
mixer, regime and attention backend are swept by `--mixers`, `--regimes`, `--attention-backends`;
the variants of one model by `--dtype float32,bfloat16`, `--batch-size 128,512` and
`--compiles false,true` (eager and compiled; `--compile` / `--no-compile` give one), each timed
side by side with the others in its regime x resolution.
`--set PATH=VALUE` reaches any BenchmarkConfig key and wins over the flags (`--set model.width=96`,
`--set 'resolutions=[224,384]'`). Every value is validated by BenchmarkConfig, so a bad one is one
line naming the field, exit 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from vitscale.bench.config import BenchmarkConfig, bench_model
from vitscale.cli.app import app
from vitscale.cli.console import stdout_console
from vitscale.cli.model_cmd import model_config, model_options
from vitscale.cli.overrides import set_option, validate_with_sets
from vitscale.errors import UserError
from vitscale.study import load_study

_SET_EXAMPLE = "resolutions=[224,384]"
BenchSetOption = set_option(
    "the benchmark (BenchmarkConfig: a study's `benchmark:` block)",
    f"--set '{_SET_EXAMPLE}' --set model.width=96 --set model.ssog.num_gaussians=8",
)


def _split(flag: str, text: str | None, kind: type = str) -> list | None:
    if text is None:
        return None
    items = [t.strip() for t in text.split(",") if t.strip()]
    try:
        return [kind(t) for t in items]
    except ValueError:
        raise UserError(f"{flag}: {text!r} is not a comma list of {kind.__name__}s") from None


def _one_or_list(flag: str, text: str | None, kind: type = str) -> Any:
    """A comma list as a list, one value as itself (what the config accepts either way)."""
    items = _split(flag, text, kind)
    return items[0] if items is not None and len(items) == 1 else items


_BOOLEANS = {"true": True, "false": False, "on": True, "off": False, "1": True, "0": False}


def _compiles(text: str | None, compile: bool | None) -> Any:
    """`--compiles false,true` -> [False, True]; `--compile` alone -> True; both: one line."""
    if text is None:
        return compile
    if compile is not None:
        raise UserError("--compiles: give --compile/--no-compile or --compiles, not both")
    items = _split("--compiles", text) or []
    if not items or any(t.lower() not in _BOOLEANS for t in items):
        raise UserError(f"--compiles: {text!r} is not a comma list of false,true")
    values = [_BOOLEANS[t.lower()] for t in items]
    return values[0] if len(values) == 1 else values


def _base(study: Path | None) -> dict[str, Any]:
    """The `benchmark:` block of a benchmark study, or nothing."""
    if study is None:
        return {}
    spec = load_study(study)
    if spec.benchmark is None:  # only a benchmark study may have one (study.check_benchmark)
        raise UserError(f"--study: {study} is a {spec.kind} study; pass one with `kind: benchmark`")
    return spec.benchmark.model_dump(exclude_unset=False)


@app.command("bench")
@model_options(exclude=("mixer", "regime", "attention.backend"))
def bench_command(
    model_overrides: dict,
    mixers: str | None = typer.Option(None, "--mixers", help="comma list, e.g. attention,ssog"),
    regimes: str | None = typer.Option(None, "--regimes", help="comma list of discrete,looped,ode"),
    resolutions: str | None = typer.Option(None, "--resolutions", help="comma list of image sides"),
    batch_size: str | None = typer.Option(
        None,
        "--batch-size",
        "--batch-sizes",
        help="matched across mixers; a comma list (128,512) times each batch size side by side",
    ),
    mode: str | None = typer.Option(None, "--mode", help="inference | train (forward+backward+AdamW step)"),
    dtype: str | None = typer.Option(
        None,
        "--dtype",
        "--dtypes",
        help="float32 | bfloat16 (autocast); a comma list (float32,bfloat16) times each side by side",
    ),
    device: str | None = typer.Option(None, "--device", help="cpu | cuda | auto"),
    attention_backend: str | None = typer.Option(
        None, "--attention-backend", "--attention-backends", help="comma list of sdpa,math"
    ),
    compile: bool | None = typer.Option(
        None,
        "--compile/--no-compile",
        help="torch.compile each model (both side by side: --compiles false,true)",
    ),
    compiles: str | None = typer.Option(
        None,
        "--compiles",
        help="false,true: time each configuration eager and compiled side by side (eager is the "
        "baseline of the variant ratios); instead of --compile/--no-compile",
    ),
    compile_mode: str | None = typer.Option(
        None, "--compile-mode", help="default | reduce-overhead (CUDA graphs) | max-autotune"
    ),
    warmup: int | None = typer.Option(None, "--warmup", help="untimed iterations"),
    repeats: int | None = typer.Option(None, "--repeats", help="timed iterations (median reported)"),
    seed: int | None = typer.Option(None, "--seed"),
    threads: int | None = typer.Option(None, "--threads", help="CPU intra-op threads"),
    interleave: bool | None = typer.Option(
        None,
        "--interleave/--sequential",
        help="time each regime x resolution's configurations round-robin (default on CPU)",
    ),
    study: Path | None = typer.Option(None, "--study", help="start from this benchmark study's `benchmark:`"),
    as_json: bool = typer.Option(False, "--json", help="print the records as JSON (no table)"),
    out: Path | None = typer.Option(None, "--out", help="write the records to this Parquet file"),
    jsonl: Path | None = typer.Option(
        None, "--jsonl", help="append each record to this file as one JSON line as soon as it is measured"
    ),
    tracking_uri: str | None = typer.Option(
        None, "--tracking-uri", help="log a parent + child runs to MLflow"
    ),
    name: str | None = typer.Option(None, "--name", help="study name in MLflow (default bench-<timestamp>)"),
    set_: BenchSetOption = None,
) -> None:
    """Measure images/s, latency, peak memory, FLOPs and NFE per mixer x regime x resolution.

    Lists of --dtype, --batch-size and --compiles time every variant side by side and print its
    ratios per image against the baseline variant (first dtype, first batch size, eager).

    Values come from the BenchmarkConfig defaults, then `--study`'s `benchmark:`, then the flags,
    then `--set PATH=VALUE` (any BenchmarkConfig key: `vitscale study schema` lists them under
    `benchmark`): a later one wins."""
    given = {
        "mixers": _split("--mixers", mixers),
        "regimes": _split("--regimes", regimes),
        "resolutions": _split("--resolutions", resolutions, int),
        "batch_size": _one_or_list("--batch-size", batch_size, int),
        "mode": mode,
        "dtype": _one_or_list("--dtype", dtype),
        "device": device,
        "attention_backends": _split("--attention-backend", attention_backend),
        "compile": _compiles(compiles, compile),
        "compile_mode": compile_mode,
        "warmup": warmup,
        "repeats": repeats,
        "seed": seed,
        "threads": threads,
    }
    data = {**_base(study), **{k: v for k, v in given.items() if v is not None}}
    if model_overrides:  # the model flags, on top of the study's model (or the benchmark defaults)
        data["model"] = model_config(model_overrides, base=data.get("model") or bench_model()).model_dump()
    config = validate_with_sets(BenchmarkConfig, data, set_ or (), _SET_EXAMPLE)
    run(
        config,
        as_json=as_json,
        out=out,
        tracking_uri=tracking_uri,
        name=name,
        interleave=interleave,
        jsonl=jsonl,
    )


def run(
    config,
    *,
    as_json: bool,
    out: Path | None,
    tracking_uri: str | None,
    name: str | None,
    interleave: bool | None = None,
    jsonl: Path | None = None,
) -> list[dict]:
    """Sweep, then print/write/log; MLflow runs and JSON lines are written as configurations finish."""
    # Lazy: the records (and the runner and report that use them) import pyarrow.
    from vitscale.bench import report, runner
    from vitscale.bench.records import to_json, write_parquet

    err = Console(stderr=True)
    log = None
    if tracking_uri:
        # Lazy: it imports MLflow, which `vitscale --help` need not pay for.
        from vitscale.tune.bench_log import MlflowBenchLog, default_study_name, study_spec

        name = name or default_study_name()
        study_spec(config, name)  # a bad name fails before any measuring
        log = MlflowBenchLog(config, tracking_uri, name)

    def on_record(record: dict) -> None:
        if log is not None:
            log.log(record)
        if jsonl is not None:
            with jsonl.open("a") as stream:
                stream.write(to_json([record], indent=None)[1:-1] + "\n")

    try:
        records = runner.run_benchmark(
            config, progress=err.is_terminal, console=err, interleave=interleave, on_record=on_record
        )
    except BaseException:
        if log is not None:
            log.finish("KILLED")
        raise
    if log is not None:
        log.finish()
    if as_json:
        sys.stdout.write(to_json(records) + "\n")
    else:
        console = stdout_console()
        for table in report.tables(records):
            console.print(table)
        for note in report.footnotes(records):
            console.print(f"[dim]{note}[/dim]")
    if out is not None:
        err.print(f"wrote {write_parquet(records, out, config)}")
    if log is not None:
        err.print(
            f"logged to MLflow: study {log.name} (parent run {log.parent_run_id}); "
            f"`vitscale analyze {log.name} --tracking-uri {tracking_uri}`"
        )
    return records
