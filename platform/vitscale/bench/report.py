"""The records as rich tables: per regime, each resolution's series side by side against the first
attention backend (sdpa where measured), with both ceilings beside the ratios; then one compact table
of the ratios against every other backend (math).

The two ceilings say what a ratio could have been. FLOP ceiling: attention's FLOPs ÷ the mixer's
(per image): the mixer's gain if time followed FLOPs. Pooling ceiling: the `pooling` mixer's
throughput ÷ attention's, measured in the same cell: its mixing costs almost nothing, so what it
gains is all any mixer can gain on this machine, given the work every mixer pays alike (MLP,
GELU, LayerNorm, residual adds) that the FLOP count does not see. Memory is shown for both modes,
inference and a training step, each beside its ratio.

A sweep that lists several dtypes, batch sizes or compile flags measures each series in every
variant: the main tables then show the columns that vary and divide within a variant (ssog in
bfloat16 ÷ attention in bfloat16), and one more table divides each series' variants by its own
baseline variant (the first dtype, the first batch size, eager: `÷ float32 b128 eager`) per image:
images/s, and CPU ms per image, since batch sizes differ. A compiled configuration's first call
(`compile_seconds`: compilation plus one iteration) is shown beside it.

A ratio within its margin (the two configurations' repeat spreads added, at least 1 %: see
`bench.margin`) is printed `≈1.00×`: a tie, not a difference. A CPU timing whose CPU time ran far
from wall × threads (`bench.contention`) is marked `*` and named in a footnote; its wall-clock
ratios get no verdict (undecided), whatever their size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich import box
from rich.table import Table

from vitscale.bench.config import VARIANT_KEYS, Variant
from vitscale.bench.contention import contention_caveat, contention_note
from vitscale.bench.margin import MIN_MARGIN, ratio_margin, side_spread, verdict
from vitscale.bench.records import series
from vitscale.errors import OUT_OF_MEMORY
from vitscale.models.registry import BASELINE, CEILING, regime_order

# ratio key -> (the value it divides, which way is better, the records' spread of that value)
RATIOS = {
    "throughput": ("images_per_second", True, "latency_spread"),
    "throughput_cpu": ("cpu_ms", False, "cpu_spread"),
    "memory": ("peak_memory_mb", False, None),
    "memory_inference": ("inference_memory_mb", False, None),
    "memory_train": ("train_memory_mb", False, None),
}
MEMORY_MODES = ("inference", "train")
STATUS_LABELS = {OUT_OF_MEMORY: "oom"}  # as the analysis shows it; the footnotes name the status


def _ok(record: Mapping[str, Any] | None, key: str) -> float | None:
    if record is None or record.get("status") != "ok":
        return None
    value = record.get(key)
    if value is None and key.endswith("_memory_mb") and key != "peak_memory_mb":
        # a record from before both modes were measured: its peak is its sweep mode's
        modes = (record.get(f"{mode}_memory_mb") for mode in MEMORY_MODES)
        if record.get("mode") == key.removesuffix("_memory_mb") and all(m is None for m in modes):
            value = record.get("peak_memory_mb")
    return float(value) if isinstance(value, int | float) else None


def _spread(record: Mapping[str, Any], key: str | None) -> float | None:
    """A record's spread of one value: its repeats' (timing), 0 for memory (measured once); none
    for a contended wall-clock timing, which then carries no verdict."""
    if key == "latency_spread" and contention_note(record):
        return None
    return side_spread([_ok(record, key)]) if key else 0.0


def variant_of(record: Mapping[str, Any]) -> Variant:
    """A record's dtype, batch size and compile flag."""
    return Variant(
        str(record.get("dtype") or ""), int(record.get("batch_size") or 0), bool(record.get("compile"))
    )


def variants(records: Sequence[Mapping[str, Any]]) -> list[Variant]:
    """The variants measured, in the records' order (`BenchmarkConfig.configurations` lists them as
    the sweep does: first dtype, first batch size, first compile flag first)."""
    return list(dict.fromkeys(variant_of(r) for r in records))


def varying(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The VARIANT_KEYS with more than one value among the records: the columns the tables add."""
    found = variants(records)
    return [key for key in VARIANT_KEYS if len({getattr(v, key) for v in found}) > 1]


def baseline_variant(records: Sequence[Mapping[str, Any]]) -> Variant | None:
    """What the variant ratios divide by: the first dtype and batch size, eager where measured (as
    `BenchmarkConfig.baseline_variant`); None with a single variant."""
    found = variants(records)
    if len(found) < 2:
        return None
    eager = any(not v.compile for v in found)
    return Variant(found[0].dtype, found[0].batch_size, False if eager else found[0].compile)


def _variant_cells(variant: Variant, keys: Sequence[str]) -> list[str]:
    """The variant's values in the varying columns: `bfloat16`, `512`, `yes`."""
    shown = {
        "dtype": variant.dtype,
        "batch_size": str(variant.batch_size),
        "compile": "yes" if variant.compile else "no",
    }
    return [shown[key] for key in keys]


VARIANT_HEADERS = {"dtype": "dtype", "batch_size": "batch", "compile": "compile"}


def where(record: Mapping[str, Any], keys: Sequence[str] = VARIANT_KEYS) -> str:
    """`ssog discrete 16` (+ ` bfloat16 b4 compiled` where the sweep varied its variant): a
    configuration in a footnote."""
    text = f"{series(record)} {record['regime']} {record['resolution']}"
    return f"{text} {variant_of(record).label()}" if keys else text


def ratios(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Candidate / baseline per regime x resolution x variant, for every non-attention x attention
    series (`variant`: the dtype, batch size and compile flag both sides ran with).

    throughput: images/s ratio (> 1: the candidate is faster); throughput_cpu: the same from
    process CPU time per batch (CPU records; steadier on a shared machine); memory: peak ratio
    in the sweep's mode, memory_inference / memory_train: in each mode (< 1: it needs less; on CPU
    of the peaks above the idle worker). Each has `<key>_margin` (None without repeat spreads) and
    `<key>_verdict`: ahead | behind | tied | undecided (bench.margin). The ceilings (module
    docstring): flop_ceiling = baseline FLOPs ÷ candidate FLOPs; pool_ceiling / pool_ceiling_cpu =
    the cell's pooling throughput ÷ the baseline's, wall and CPU time (None where pooling was not
    measured or failed).
    """
    cells: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["regime"], r["resolution"], variant_of(r)), {})[series(r)] = r
    out = []
    regimes = regime_order(regime for regime, _, _ in cells)
    order = variants(records)
    for (regime, resolution, variant), cell in sorted(
        cells.items(), key=lambda kv: (regimes.index(kv[0][0]), kv[0][1], order.index(kv[0][2]))
    ):
        pool = cell.get(CEILING)
        for cand, c in cell.items():
            if c["mixer"] == BASELINE:
                continue
            for base, b in cell.items():
                if b["mixer"] != BASELINE:
                    continue
                row = {
                    "regime": regime,
                    "resolution": resolution,
                    "variant": variant,
                    "candidate": cand,
                    "baseline": base,
                }
                for name, (value, higher, spread) in RATIOS.items():
                    ratio = _div(_ok(c, value), _ok(b, value))
                    margin = ratio_margin(_spread(c, spread), _spread(b, spread))
                    row[name], row[f"{name}_margin"] = ratio, margin
                    row[f"{name}_verdict"] = verdict(ratio, margin, higher_is_better=higher)
                if row["throughput_cpu"] is not None:  # shown as "faster": time ratio inverted
                    row["throughput_cpu"] = 1.0 / row["throughput_cpu"]
                row["flop_ceiling"] = _div(_flops(b), _flops(c))
                row["pool_ceiling"] = _div(_ok(pool, "images_per_second"), _ok(b, "images_per_second"))
                row["pool_ceiling_cpu"] = _div(_ok(b, "cpu_ms"), _ok(pool, "cpu_ms"))
                out.append(row)
    return out


def variant_ratios(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Each series' variants ÷ its baseline variant (`baseline_variant`), per regime x resolution x
    series, per image: throughput = images/s ÷ the baseline's; throughput_cpu = the baseline's CPU
    ms per image ÷ the variant's (both > 1: faster per image), each with `<key>_margin` and
    `<key>_verdict` (bench.margin). One row per variant, the baseline's own included (its ratios
    None); none with a single variant."""
    base_variant = baseline_variant(records)
    if base_variant is None:
        return []
    order = variants(records)
    groups: dict[tuple, dict[Variant, Mapping[str, Any]]] = {}
    for r in records:
        groups.setdefault((r["regime"], r["resolution"], series(r)), {})[variant_of(r)] = r
    regimes = regime_order(regime for regime, _, _ in groups)
    out = []
    for (regime, resolution, name), group in sorted(
        groups.items(),
        key=lambda kv: (regimes.index(kv[0][0]), kv[0][1], *_series_key(next(iter(kv[1].values())))),
    ):
        b = group.get(base_variant)
        for variant in sorted(group, key=order.index):
            r = group[variant]
            row: dict[str, Any] = {
                "regime": regime,
                "resolution": resolution,
                "series": name,
                "variant": variant,
                "baseline_variant": base_variant,
                "record": r,
            }
            for key, value, spread in (
                ("throughput", _ok(r, "images_per_second"), "latency_spread"),
                ("throughput_cpu", _per_image(r), "cpu_spread"),
            ):
                base = _ok(b, "images_per_second") if key == "throughput" else _per_image(b)
                ratio = None if variant == base_variant else _div(value, base)
                if key == "throughput_cpu" and ratio is not None:
                    ratio = 1.0 / ratio  # shown as "faster": a time ratio inverted
                margin = ratio_margin(_spread(r, spread), _spread(b, spread)) if b is not None else None
                row[key], row[f"{key}_margin"] = ratio, margin
                row[f"{key}_verdict"] = verdict(ratio, margin) if ratio is not None else "undecided"
            out.append(row)
    return out


def _per_image(record: Mapping[str, Any] | None) -> float | None:
    """CPU ms per image: a batch's CPU time over its batch size."""
    cpu = _ok(record, "cpu_ms")
    return cpu / record["batch_size"] if cpu is not None and record and record.get("batch_size") else None


def _series_key(record: Mapping[str, Any]) -> tuple:
    """Attention first, then the candidates by name."""
    return (record["mixer"] != BASELINE, series(record))


def _flops(record: Mapping[str, Any]) -> float | None:
    """FLOPs per image: counted before any iteration, so a configuration that failed later has it."""
    value = record.get("flops_per_image")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _ratio(value: float | None, verdict_: str = "") -> str:
    """`1.23×`; `≈1.00×` where the ratio lies within its margin (a tie)."""
    return "—" if value is None else f"{'≈' if verdict_ == 'tied' else ''}{value:.2f}×"


def _short(base: str) -> str:
    return base.split("/", 1)[1] if "/" in base else base


def baselines(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """The attention series measured, sdpa first: the main table's divisor is the first."""
    return sorted(
        {series(r) for r in records if r["mixer"] == BASELINE}, key=lambda b: (b != "attention/sdpa", b)
    )


def _title(records: Sequence[Mapping[str, Any]], what: str) -> str:
    """`discrete · ÷ attention/sdpa · batch 2 · timed: train · float32 · cpu`; a variant key the
    sweep varied lists its values (`batch 128,512`, `float32,bfloat16`, `eager + compiled`)."""
    first, found = records[0], variants(records)
    batches = ",".join(map(str, dict.fromkeys(v.batch_size for v in found)))
    dtypes = ",".join(dict.fromkeys(v.dtype for v in found))
    flags = {v.compile for v in found}
    mode = next((r.get("compile_mode") for r in records if r.get("compile")), None)
    compiled = {
        frozenset({True}): f" · compiled ({mode})",
        frozenset({True, False}): f" · eager + compiled ({mode})",
    }
    return (
        f"{what} · batch {batches} · timed: {first['mode']} · {dtypes} · "
        f"{first['device']}{compiled.get(frozenset(flags), '')}"
    )


def _table(title: str) -> Table:
    """Rules under the header and between resolutions only, one space between columns: the
    main tables' 15 columns fit 120 characters."""
    return Table(
        title=title,
        title_justify="left",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        collapse_padding=True,
        pad_edge=False,
        show_edge=False,
    )


def _pool_ceiling(row: Mapping[str, Any] | None, cpu: bool) -> float | None:
    if row is None:
        return None
    return row["pool_ceiling_cpu"] if cpu else row["pool_ceiling"]


def tables(records: Sequence[Mapping[str, Any]]) -> list[Table]:
    """One table per regime (and per variant, which its title names, where the sweep measured
    several) against the first attention backend (rows grouped by resolution, ratios and ceilings
    on candidate rows), then `other_baselines_table` where more backends were measured, then
    `variants_table` where more variants were.

    `thr`: candidate images/s ÷ the baseline's; `cpu`: the same from CPU time; `mem`: each
    mode's peak ÷ the baseline's. A failed configuration shows its status (out_of_memory, error)
    in place of its throughput.
    """
    bases = baselines(records)
    base = bases[0] if bases else None  # no attention measured: the measured columns only
    by_key = {
        (r["regime"], r["resolution"], r["variant"], r["candidate"], r["baseline"]): r
        for r in ratios(records)
    }
    out = []
    every = [
        [r for r in records if r["regime"] == regime and variant_of(r) == variant]
        for regime in regime_order(r["regime"] for r in records)
        for variant in variants(records)
    ]
    for rows in filter(None, every):
        regime = rows[0]["regime"]
        table = _table(_title(rows, f"{regime} · ÷ {base}" if base else regime))
        cpu = any(r.get("cpu_ms") is not None for r in rows)
        nfe = any(r.get("nfe") is not None for r in rows)
        compiled = any(r.get("compile") for r in rows)
        short = _short(base or "")
        measured = (
            "px",
            "tokens",
            "series",
            *(["NFE"] * nfe),
            "GFLOP\n/img",
            "img/s",
            *(["cpu ms"] * cpu),
            *(["comp\ns"] * compiled),
        )
        divided = (
            f"thr\n÷{short}",
            *([f"cpu\n÷{short}"] * cpu),
            "FLOP\nceil",
            "pool\nceil",
            f"mem\ninf\n÷{short}",
            f"mem\ntrain\n÷{short}",
        )
        for col in (*measured, "MB\ninf", "MB\ntrain", *(divided if base else ())):
            table.add_column(col, justify="left" if col == "series" else "right", no_wrap=True)
        resolutions = sorted({r["resolution"] for r in rows})
        for i, res in enumerate(resolutions):
            cell = _cell(rows, res)
            for j, r in enumerate(cell):
                values = _measured(r, j, res, cpu, nfe, compiled)
                row = by_key.get((regime, res, variant_of(r), series(r), base))
                if row:
                    values += [
                        _ratio(row["throughput"], row["throughput_verdict"]),
                        *([_ratio(row["throughput_cpu"], row["throughput_cpu_verdict"])] * cpu),
                        _ratio(row["flop_ceiling"]),
                        _ratio(_pool_ceiling(row, cpu)),
                        _ratio(row["memory_inference"], row["memory_inference_verdict"]),
                        _ratio(row["memory_train"], row["memory_train_verdict"]),
                    ]
                elif base:
                    values += [""] * len(divided)
                table.add_row(*values, end_section=j == len(cell) - 1 and i < len(resolutions) - 1)
        out.append(table)
    if len(bases) > 1:
        out.append(other_baselines_table(records, bases[1:]))
    if baseline_variant(records) is not None:
        out.append(variants_table(records))
    return out


def _cell(rows: Sequence[Mapping[str, Any]], resolution: int) -> list[Mapping[str, Any]]:
    """One resolution's records: variant by variant, in each attention first, then the candidates
    by name."""
    order = variants(rows)
    return sorted(
        (r for r in rows if r["resolution"] == resolution),
        key=lambda r: (order.index(variant_of(r)), *_series_key(r)),
    )


def _seconds(record: Mapping[str, Any]) -> str:
    """A compiled configuration's compile seconds; nothing for an eager one."""
    if not record.get("compile"):
        return ""
    seconds = record.get("compile_seconds")
    return _fmt(seconds, 0 if (seconds or 0) >= 100 else 1)


def _measured(
    r: Mapping[str, Any], j: int, res: int, cpu: bool, nfe: bool, compiled: bool = False
) -> list[str]:
    """The measured columns of one record's row (px and tokens on a cell's first row only)."""
    flops = r.get("flops_per_image")
    img_s = _fmt(_ok(r, "images_per_second")) + ("*" if contention_note(r) else "")
    return [
        str(res) if j == 0 else "",
        str(r["tokens"]) if j == 0 else "",
        series(r),
        *([str(r["nfe"]) if r.get("nfe") is not None else "—"] * nfe),
        f"{flops / 1e9:.3g}" if flops else "—",
        img_s if r["status"] == "ok" else f"[red]{STATUS_LABELS.get(r['status'], r['status'])}[/red]",
        *([_fmt(_ok(r, "cpu_ms"), 0 if (_ok(r, "cpu_ms") or 0) >= 100 else 1)] * cpu),
        *([_seconds(r)] * compiled),
        *(_fmt(_ok(r, f"{mode}_memory_mb"), 0) for mode in MEMORY_MODES),
    ]


def other_baselines_table(records: Sequence[Mapping[str, Any]], bases: Sequence[str]) -> Table:
    """The candidates' ratios against every attention backend but the first, all regimes in one
    compact table (the ceilings stay in the main tables, against their baseline), each within its
    variant."""
    cpu = any(r.get("cpu_ms") is not None for r in records)
    keys = varying(records)
    table = _table(_title(records, "÷ " + ", ".join(bases)))
    for col in ("regime", "px", "series", *(VARIANT_HEADERS[k] for k in keys)):
        table.add_column(col, justify="right" if col in ("px", "batch") else "left", no_wrap=True)
    for base in bases:
        short = _short(base)
        for col in (
            f"thr ÷{short}",
            *([f"cpu ÷{short}"] * cpu),
            f"mem inf ÷{short}",
            f"mem train ÷{short}",
        ):
            table.add_column(col, justify="right", no_wrap=True)
    ratio_keys = ("throughput", *(["throughput_cpu"] * cpu), "memory_inference", "memory_train")
    by_key = {
        (r["regime"], r["resolution"], r["variant"], r["candidate"], r["baseline"]): r
        for r in ratios(records)
    }
    regimes = regime_order(r["regime"] for r in records)
    for k, regime in enumerate(regimes):
        rows = [r for r in records if r["regime"] == regime]
        resolutions = sorted({r["resolution"] for r in rows})
        for i, res in enumerate(resolutions):
            cands = [r for r in _cell(rows, res) if r["mixer"] != BASELINE]
            for j, r in enumerate(cands):
                values = [regime if i == j == 0 else "", str(res) if j == 0 else "", series(r)]
                values += _variant_cells(variant_of(r), keys)
                for base in bases:
                    row = by_key.get((regime, res, variant_of(r), series(r), base))
                    values += (
                        [_ratio(row[key], row[f"{key}_verdict"]) for key in ratio_keys]
                        if row
                        else [""] * len(ratio_keys)
                    )
                last = j == len(cands) - 1 and (i < len(resolutions) - 1 or k < len(regimes) - 1)
                table.add_row(*values, end_section=last)
    return table


def variants_table(records: Sequence[Mapping[str, Any]]) -> Table:
    """Each series' variants ÷ its baseline variant (`variant_ratios`), all regimes in one table,
    per image: images/s and CPU ms per image, their ratios, and a compiled variant's first call."""
    rows = variant_ratios(records)
    base = rows[0]["baseline_variant"]
    cpu = any(r.get("cpu_ms") is not None for r in records)
    compiled = any(r.get("compile") for r in records)
    keys = varying(records)
    table = _table(_title(records, f"variants · ÷ {base.label()} (base)"))
    columns = (
        "regime",
        "px",
        "series",
        *(VARIANT_HEADERS[k] for k in keys),
        "img/s",
        *(["cpu ms\n/img"] * cpu),
        *(["comp\ns"] * compiled),
        "thr\n÷base",
        *(["cpu\n÷base"] * cpu),
    )
    for col in columns:
        table.add_column(
            col, justify="left" if col in ("regime", "series", "dtype") else "right", no_wrap=True
        )
    previous: tuple = ()
    for n, row in enumerate(rows):
        r, here = row["record"], (row["regime"], row["resolution"], row["series"])
        first = here != previous
        per_image = _per_image(r)
        values = [
            row["regime"] if first and (not previous or previous[0] != row["regime"]) else "",
            str(row["resolution"]) if first and previous[:2] != here[:2] else "",
            row["series"] if first else "",
            *_variant_cells(row["variant"], keys),
            _fmt(_ok(r, "images_per_second")) + ("*" if contention_note(r) else "")
            if r["status"] == "ok"
            else f"[red]{STATUS_LABELS.get(r['status'], r['status'])}[/red]",
            *([_fmt(per_image, 2 if (per_image or 0) < 10 else 1)] * cpu),
            *([_seconds(r)] * compiled),
        ]
        if row["variant"] == base:  # what the others divide by
            values += [""] * (1 + cpu)
        else:
            values += [
                _ratio(row["throughput"], row["throughput_verdict"]),
                *([_ratio(row["throughput_cpu"], row["throughput_cpu_verdict"])] * cpu),
            ]
        following = rows[n + 1] if n + 1 < len(rows) else None
        ends = following is not None and (following["regime"], following["resolution"]) != here[:2]
        table.add_row(*values, end_section=ends)
        previous = here
    return table


def footnotes(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the memory columns and the ceilings are, what ≈ and * mean, and every failure's message."""
    notes = []
    kinds = {r.get("memory_kind") for r in records if r.get("memory_kind")}
    modes = (
        "inf / train MB: one eager inference iteration / one eager training step (forward + backward + AdamW)"
    )
    if "rss_above_idle" in kinds:
        idle = next((r["baseline_memory_mb"] for r in records if r.get("baseline_memory_mb")), None)
        notes.append(
            f"{modes}, peak RSS above idle: the worker's peak minus its own peak before the model was built "
            f"(python, torch, vitscale and the FLOP counter loaded: {_fmt(idle, 0)} MB, subtracted from each)"
        )
    if "process_peak_rss" in kinds:
        notes.append("peak MB = peak RSS of the whole worker process (python + torch included)")
    if "cuda_max_allocated" in kinds:
        notes.append(f"{modes}: torch.cuda.max_memory_allocated (weights, inputs, activations, gradients)")
    if any(r.get("compile") for r in records):
        notes.append(
            "memory is eager PyTorch's: torch.compile is paid once per configuration, where it is timed; "
            "comp s: wall seconds of a compiled configuration's first call (compiling + one iteration)"
        )
    base_variant = baseline_variant(records)
    if base_variant is not None:
        notes.append(
            f"variants ÷ {base_variant.label()}: each series ÷ itself in that variant, same regime and "
            "resolution, timed round-robin together; thr: images/s ratio, cpu: CPU ms per image "
            "inverted (>1: faster per image whatever the batch); MB columns are per batch"
        )
    notes.append(
        "thr ÷X: candidate images/s ÷ attention/X images/s (>1: faster); "
        "mem ÷X: candidate peak ÷ attention/X peak in that mode (<1: leaner); "
        f"≈: within the margin, both sides' repeat spreads added (at least {MIN_MARGIN:.0%}): tied"
    )
    cpu = any(r.get("cpu_ms") is not None for r in records)
    if cpu:
        notes.append(
            "cpu ms: process CPU time per batch (user+sys, all threads); cpu ÷X: attention/X "
            "cpu ms ÷ candidate cpu ms — leaves out time spent descheduled on a shared machine"
        )
    notes.append(
        "FLOP ceil: attention's FLOPs ÷ the candidate's, what it would gain if time followed FLOPs; "
        f"pool ceil: {CEILING}'s {'cpu' if cpu else 'thr'} ÷X in the same cell, mixing almost free, "
        "so what any mixer can gain here given the MLP, GELU, LayerNorm and residual work all pay alike"
    )
    cells = {(r["regime"], r["resolution"]) for r in records}
    pooled = {
        (r["regime"], r["resolution"]) for r in records if r["mixer"] == CEILING and r["status"] == "ok"
    }
    if len(pooled) < len(cells):
        notes.append(
            f"pool ceil —: {CEILING} was not measured in {len(cells - pooled)} of {len(cells)} cells "
            f"(add it to --mixers, or it failed: below)"
        )
    keys = varying(records)
    contended = [(r, contention_note(r)) for r in records if r["status"] == "ok" and contention_note(r)]
    if contended:
        caveat = contention_caveat([r.get("cpu_wall_ratio") for r in records if r["status"] == "ok"])
        notes.append(
            f"*: contended timing — {caveat} "
            + ", ".join(f"{where(r, keys)} ({note})" for r, note in contended)
        )
    for r in records:
        if r["status"] != "ok" or r.get("error"):
            notes.append(f"{where(r, keys)}: {r['status']}: {r.get('error') or ''}")
    return notes
