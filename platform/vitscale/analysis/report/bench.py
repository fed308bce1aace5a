"""Benchmark sections of report.md: per regime x resolution, each series' throughput and peak memory,
SSoG/attention ratios against every attention backend measured, crossovers and per-cell fronts."""

from __future__ import annotations

import numpy as np

from vitscale.analysis.load.fields import as_float
from vitscale.analysis.report.markdown import num, table
from vitscale.analysis.result import AnalysisResult, series_order
from vitscale.bench.contention import contention_caveat, is_contended
from vitscale.bench.margin import MIN_MARGIN
from vitscale.errors import is_out_of_memory
from vitscale.models.registry import BASELINE, regime_order


def _value(mean: float, ci: float) -> str:
    if not np.isfinite(mean):
        return "—"
    return f"{mean:.4g}" + (f" ± {ci:.2g}" if np.isfinite(ci) and ci > 0 else "")


def _ratio(r: float) -> str:
    return "—" if not np.isfinite(r) else f"{r:.2f}× ({100 * (r - 1):+.0f} %)"


def measurement_tables(res: AnalysisResult) -> list[str]:
    agg = res.aggregates
    series, regimes = agg.column("series").to_pylist(), agg.column("regime").to_pylist()
    settings, res_px = agg.column("setting").to_pylist(), as_float(agg.column("resolution"))
    used, reasons = as_float(agg.column("n_used")), agg.column("failure_reasons").to_pylist()
    tok = as_float(agg.column("tokens_mean" if "tokens_mean" in agg.column_names else "tokens"))
    metrics = [m for m in ("images_per_second", "peak_memory_mb") if f"{m}_mean" in agg.column_names]
    vals = {m: (as_float(agg.column(f"{m}_mean")), as_float(agg.column(f"{m}_ci95"))) for m in metrics}
    names = series_order(series)
    bases = [s for s in names if str(s).startswith(BASELINE)]
    cands = [s for s in names if not str(s).startswith(BASELINE)]
    above_idle = "process_peak_rss_mb_mean" in agg.column_names
    unit = {"images_per_second": "img/s", "peak_memory_mb": "MB above idle" if above_idle else "MB"}
    contended = (
        [is_contended(r) for r in as_float(agg.column("cpu_wall_ratio_mean"))]
        if "cpu_wall_ratio_mean" in agg.column_names
        else [False] * agg.num_rows
    )
    memory = (
        "peak memory in MB above the idle worker (CPU: the worker's peak RSS minus its peak before "
        "the model was built; CUDA: max allocated)"
        if above_idle
        else "peak memory in MB"
    )
    # candidate/baseline throughput as timed side by side in the candidate's trials (bench.paired)
    paired = {
        b: as_float(agg.column(f"paired_ratio_{b.split('/', 1)[1]}_mean"))
        for b in bases
        if "/" in b and f"paired_ratio_{b.split('/', 1)[1]}_mean" in agg.column_names
    }
    source = (
        "throughput ratios as timed side by side in the candidate's own trials (paired: two trials "
        "timed minutes apart differ by the machine's drift), memory ratios across trials"
        if paired
        else "ratios are candidate / baseline measured in the same sweep"
    )
    out = [
        "## Throughput and peak memory by regime and resolution",
        "",
        f"Throughput in images/s and {memory} (mean ± 95 % CI over seeds where there are several); "
        f"{source} (`oom`: out of memory)"
        + ("; `*`: a contended timing (see *Contended timings*)." if any(contended) else "."),
        "",
    ]
    for setting in dict.fromkeys(settings):
        if setting:
            out += [f"### {setting}", ""]
        rows = []
        for regime in regime_order([r for r in regimes if r]):
            for px in sorted(
                {
                    float(res_px[i])
                    for i in range(agg.num_rows)
                    if regimes[i] == regime and settings[i] == setting
                }
            ):
                cell = {
                    series[i]: i
                    for i in range(agg.num_rows)
                    if regimes[i] == regime and settings[i] == setting and res_px[i] == px
                }
                t = next((tok[i] for i in cell.values() if np.isfinite(tok[i])), float("nan"))
                row = [regime, num(int(px)), num(int(t)) if np.isfinite(t) else "—"]
                for s in names:
                    for m in metrics:
                        i = cell.get(s)
                        if i is None:
                            row.append("—")
                        elif used[i] == 0:
                            row.append(
                                "oom" if is_out_of_memory(reasons[i]) or "memory" in reasons[i] else "failed"
                            )
                        else:
                            mark = "*" if m == "images_per_second" and contended[i] else ""
                            row.append(_value(*(v[i] for v in vals[m])) + mark)
                for c in cands:
                    for b in bases:
                        for m in metrics:
                            ic, ib = cell.get(c), cell.get(b)
                            r = (
                                vals[m][0][ic] / vals[m][0][ib]
                                if ic is not None and ib is not None
                                else float("nan")
                            )
                            side_by_side = paired.get(b)
                            if m == "images_per_second" and ic is not None and side_by_side is not None:
                                r = side_by_side[ic] if np.isfinite(side_by_side[ic]) else r
                            row.append(_ratio(r))
                rows.append(row)
        header = ["regime", "resolution", "tokens"]
        header += [f"{s} {unit[m]}" for s in names for m in metrics]
        header += [
            f"{c}/{b} {'throughput' if m == 'images_per_second' else 'memory'}"
            for c in cands
            for b in bases
            for m in metrics
        ]
        out += table(header, rows)
    return out


STATUS_WORDS = {
    "ahead_throughout": "ahead at every resolution",
    "behind_throughout": "behind at every resolution",
    "tied_throughout": "tied at every resolution",
    "ahead_or_tied": "ahead or tied, never behind",
    "behind_or_tied": "behind or tied, never ahead",
    "falls_behind": "ahead at first, then behind",
    "mixed": "back and forth",
    "undecided": "undecided (a timing contended, or without spread)",
    "no_common_resolution": "no common resolution",
}


def _largest(c) -> str:
    if not c.ratio_at_largest:
        return "—"
    margin = f" ±{100 * c.margin_at_largest:.0f} %" if c.margin_at_largest is not None else ""
    return f"{c.ratio_at_largest:.2f}×{margin} at {c.largest}"


def crossover_section(res: AnalysisResult) -> list[str]:
    if not res.crossovers:
        return []
    rows = []
    for c in res.crossovers:
        where = f"{c.resolution:.0f} px" if c.resolution else STATUS_WORDS.get(c.status, c.status)
        between = f"{c.below}–{c.above}" if c.below else "—"
        rows.append(
            [
                c.regime,
                c.setting or "—",
                c.candidate,
                c.baseline,
                {"images_per_second": "throughput", "peak_memory_mb": "peak memory"}.get(c.metric, c.metric),
                where,
                between,
                _largest(c),
                c.verdicts or "—",
            ]
        )
    return [
        "## Crossover resolutions",
        "",
        "At each resolution the candidate is *ahead* or *behind* only where candidate / baseline "
        "differs from 1 by more than the margin (±): both sides' spreads added — the timed repeats' "
        "interquartile range over their median, or the 95 % interval over seeds where that is wider — "
        f"and at least {MIN_MARGIN:.0%}; within it the two are *tied*, and a side with no spread (one "
        "repeat, one seed) or a contended timing (*Contended timings*) leaves it *undecided*. A crossover is where the candidate turns from behind "
        "to ahead, interpolated in log space around the sign change of log(ratio) "
        "([crossovers.csv](crossovers.csv)).",
        "",
        *table(
            [
                "regime",
                "setting",
                "candidate",
                "baseline",
                "metric",
                "crossover",
                "between",
                "ratio at largest",
                "per resolution",
            ],
            rows,
        ),
    ]


def bench_fronts_section(res: AnalysisResult) -> list[str]:
    by_name = {f.name: f for f in res.fronts}
    cells: dict[tuple, dict[str, list[str]]] = {}
    for key, front in (
        ("fastest", by_name.get("resolution_images_per_second")),
        ("leanest", by_name.get("resolution_peak_memory_mb")),
        ("front", by_name.get("peak_memory_mb_images_per_second")),
    ):
        if front is None:
            continue
        t = front.table
        for i in range(t.num_rows):
            cell = (
                t.column("regime")[i].as_py(),
                t.column("resolution")[i].as_py(),
                t.column("setting")[i].as_py(),
            )
            cells.setdefault(cell, {}).setdefault(key, []).append(str(t.column("series")[i].as_py()))
    if not cells:
        return []
    order = sorted(cells, key=lambda k: (regime_order([c[0] for c in cells]).index(k[0]), k[2], k[1]))
    rows = [
        [
            r,
            num(px),
            s or "—",
            *(", ".join(cells[(r, px, s)].get(k, [])) or "—" for k in ("fastest", "leanest", "front")),
        ]
        for r, px, s in order
    ]
    links = " · ".join(f"[{f.path.name}]({f.path.name})" for f in res.fronts if f.path is not None)
    return [
        "## Fronts per regime × resolution",
        "",
        f"CSV: {links}",
        "",
        *table(
            ["regime", "resolution", "setting", "fastest", "least memory", "throughput–memory front"], rows
        ),
    ]


def contention_section(res: AnalysisResult) -> list[str]:
    """Which CPU timings shared their cores: CPU time far from wall × threads (bench.contention)."""
    t = res.runs
    if "cpu_wall_ratio" not in t.column_names:
        return []
    ratio = as_float(t.column("cpu_wall_ratio"))
    measured = [i for i in range(t.num_rows) if np.isfinite(ratio[i])]
    if not measured:
        return []
    seeds = t.column("seed").to_pylist()
    several = len(set(seeds)) > 1
    names = [
        f"{t.column('series')[i].as_py()} {t.column('regime')[i].as_py()} "
        f"{num(t.column('resolution')[i].as_py())}" + (f" s{seeds[i]}" if several else "")
        for i in range(t.num_rows)
    ]
    flagged = [i for i in measured if is_contended(float(ratio[i]))]
    caveat = contention_caveat(ratio[measured].tolist())
    listed = ", ".join(f"{names[i]} ({ratio[i]:.2f})" for i in flagged)
    return ["## Contended timings", "", f"{caveat} {listed}." if flagged else caveat, ""]


def bench_sections(res: AnalysisResult) -> list[str]:
    return (
        measurement_tables(res) + contention_section(res) + crossover_section(res) + bench_fronts_section(res)
    )
