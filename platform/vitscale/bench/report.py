"""The records as rich tables: per regime, each resolution's series side by side, with the
candidate/attention ratios of throughput and peak memory against every attention backend measured.

A ratio within its margin (the two configurations' repeat spreads added, at least 1 %: see
`bench.margin`) is printed `≈1.00×`: a tie, not a difference. A CPU timing whose CPU time ran far
from wall × threads (`bench.contention`) is marked `*` and named in a footnote; its wall-clock
ratios get no verdict (undecided), whatever their size.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.table import Table

from vitscale.bench.contention import contention_note
from vitscale.bench.margin import MIN_MARGIN, ratio_margin, side_spread, verdict
from vitscale.bench.records import series
from vitscale.models.registry import BASELINE, regime_order

# ratio key -> (the value it divides, which way is better, the records' spread of that value)
RATIOS = {
    "throughput": ("images_per_second", True, "latency_spread"),
    "throughput_cpu": ("cpu_ms", False, "cpu_spread"),
    "memory": ("peak_memory_mb", False, None),
}


def _ok(record: Mapping[str, Any] | None, key: str) -> float | None:
    if record is None or record.get("status") != "ok":
        return None
    value = record.get(key)
    return float(value) if isinstance(value, int | float) else None


def _spread(record: Mapping[str, Any], key: str | None) -> float | None:
    """A record's spread of one value: its repeats' (timing), 0 for memory (measured once); none
    for a contended wall-clock timing, which then carries no verdict."""
    if key == "latency_spread" and contention_note(record):
        return None
    return side_spread([_ok(record, key)]) if key else 0.0


def ratios(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Candidate / baseline per regime x resolution, for every non-attention x attention series.

    throughput: images/s ratio (> 1: the candidate is faster); throughput_cpu: the same from
    process CPU time per batch (CPU records; steadier on a shared machine); memory: peak ratio
    (< 1: it needs less; on CPU of the peaks above the idle worker). Each has `<key>_margin` (None
    without repeat spreads) and `<key>_verdict`: ahead | behind | tied | undecided (bench.margin).
    """
    cells: dict[tuple, dict[str, Mapping[str, Any]]] = {}
    for r in records:
        cells.setdefault((r["regime"], r["resolution"]), {})[series(r)] = r
    out = []
    regimes = regime_order(regime for regime, _ in cells)
    for (regime, resolution), cell in sorted(cells.items(), key=lambda kv: (regimes.index(kv[0][0]), kv[0])):
        for cand, c in cell.items():
            if c["mixer"] == BASELINE:
                continue
            for base, b in cell.items():
                if b["mixer"] != BASELINE:
                    continue
                row = {"regime": regime, "resolution": resolution, "candidate": cand, "baseline": base}
                for name, (value, higher, spread) in RATIOS.items():
                    ratio = _div(_ok(c, value), _ok(b, value))
                    margin = ratio_margin(_spread(c, spread), _spread(b, spread))
                    row[name], row[f"{name}_margin"] = ratio, margin
                    row[f"{name}_verdict"] = verdict(ratio, margin, higher_is_better=higher)
                if row["throughput_cpu"] is not None:  # shown as "faster": time ratio inverted
                    row["throughput_cpu"] = 1.0 / row["throughput_cpu"]
                out.append(row)
    return out


def _div(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:,.{digits}f}"


def _ratio(value: float | None, verdict_: str = "") -> str:
    """`1.23×`; `≈1.00×` where the ratio lies within its margin (a tie)."""
    return "—" if value is None else f"{'≈' if verdict_ == 'tied' else ''}{value:.2f}×"


def _short(base: str) -> str:
    return base.split("/", 1)[1] if "/" in base else base


def tables(records: Sequence[Mapping[str, Any]]) -> list[Table]:
    """One table per regime; rows grouped by resolution; ratio columns on candidate rows.

    `thr ÷X`: candidate images/s over attention/X's; `mem ÷X`: candidate peak over attention/X's.
    A failed configuration shows its status (out_of_memory, error) in place of its throughput.
    """
    bases = sorted(
        {series(r) for r in records if r["mixer"] == BASELINE}, key=lambda b: (b != "attention/sdpa", b)
    )
    by_key = {(r["regime"], r["resolution"], r["candidate"], r["baseline"]): r for r in ratios(records)}
    out = []
    for regime in regime_order(r["regime"] for r in records):
        rows = [r for r in records if r["regime"] == regime]
        first = rows[0]
        title = (
            f"{regime} · batch {first['batch_size']} · {first['mode']} · {first['dtype']} · "
            f"{first['device']}{' · compiled (' + str(first.get('compile_mode')) + ')' if first['compile'] else ''}"
        )
        table = Table(title=title, title_justify="left")
        cpu = any(r.get("cpu_ms") is not None for r in rows)
        above_idle = any(r.get("memory_kind") == "rss_above_idle" for r in rows)
        for col in (
            "px",
            "tokens",
            "series",
            "NFE",
            "GFLOP/img",
            "img/s",
            "ms/batch",
            *(["cpu ms"] * cpu),
            "MB above idle" if above_idle else "peak MB",
        ):
            table.add_column(col, justify="left" if col == "series" else "right", no_wrap=col == "series")
        for base in bases:
            table.add_column(f"thr ÷{_short(base)}", justify="right")
            if cpu:
                table.add_column(f"cpu-thr ÷{_short(base)}", justify="right")
            table.add_column(f"mem ÷{_short(base)}", justify="right")
        resolutions = sorted({r["resolution"] for r in rows})
        for i, res in enumerate(resolutions):
            cell = sorted(
                (r for r in rows if r["resolution"] == res), key=lambda r: (r["mixer"] != BASELINE, series(r))
            )
            for j, r in enumerate(cell):
                flops = r.get("flops_per_image")
                ok = r["status"] == "ok"
                values = [
                    str(res) if j == 0 else "",
                    str(r["tokens"]) if j == 0 else "",
                    series(r),
                    str(r["nfe"]) if r.get("nfe") is not None else "—",
                    f"{flops / 1e9:.3g}" if flops else "—",
                    _fmt(_ok(r, "images_per_second")) + ("*" if contention_note(r) else "")
                    if ok
                    else f"[red]{r['status']}[/red]",
                    _fmt(_ok(r, "latency_ms")),
                    *([_fmt(_ok(r, "cpu_ms"))] * cpu),
                    _fmt(_ok(r, "peak_memory_mb"), 0),
                ]
                for base in bases:
                    row = by_key.get((regime, res, series(r), base))
                    keys = ("throughput", "throughput_cpu", "memory") if cpu else ("throughput", "memory")
                    values += [_ratio(row[k], row[f"{k}_verdict"]) for k in keys] if row else [""] * len(keys)
                table.add_row(*values, end_section=j == len(cell) - 1 and i < len(resolutions) - 1)
        out.append(table)
    return out


def footnotes(records: Sequence[Mapping[str, Any]]) -> list[str]:
    """What the memory column is, what ≈ and * mean, and every failure's message."""
    notes = []
    kinds = {r.get("memory_kind") for r in records if r.get("memory_kind")}
    if "rss_above_idle" in kinds:
        idle = next((r["baseline_memory_mb"] for r in records if r.get("baseline_memory_mb")), None)
        notes.append(
            "MB above idle = the worker's peak RSS minus its own peak before the model was built "
            f"(python, torch, vitscale and the FLOP counter loaded: {_fmt(idle, 0)} MB, subtracted from each)"
        )
    if "process_peak_rss" in kinds:
        notes.append("peak MB = peak RSS of the whole worker process (python + torch included)")
    if "cuda_max_allocated" in kinds:
        notes.append("peak MB = torch.cuda.max_memory_allocated (weights, inputs and activations)")
    notes.append(
        "thr ÷X: candidate images/s ÷ attention/X images/s (>1: faster); "
        "mem ÷X: candidate peak ÷ attention/X peak (<1: leaner); "
        f"≈: within the margin, both sides' repeat spreads added (at least {MIN_MARGIN:.0%}): tied"
    )
    if any(r.get("cpu_ms") is not None for r in records):
        notes.append(
            "cpu ms: process CPU time per batch (user+sys, all threads); cpu-thr ÷X: attention/X "
            "cpu ms ÷ candidate cpu ms — leaves out time spent descheduled on a shared machine"
        )
    contended = [(r, contention_note(r)) for r in records if r["status"] == "ok" and contention_note(r)]
    if contended:
        notes.append(
            f"*: contended timing, CPU time far from wall × threads ({len(contended)} of "
            f"{sum(r['status'] == 'ok' for r in records)}; its img/s includes time it waited for a core): "
            + ", ".join(f"{series(r)} {r['regime']} {r['resolution']} ({note})" for r, note in contended)
        )
    for r in records:
        if r["status"] != "ok":
            notes.append(
                f"{series(r)} {r['regime']} {r['resolution']}: {r['status']}: {r.get('error') or ''}"
            )
    return notes
