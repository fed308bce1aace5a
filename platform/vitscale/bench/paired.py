"""Paired timing for benchmark studies: a candidate's trial also times its cell's attention
configurations, round-robin with its own, so its ratios to them are measured side by side.

Why: a benchmark study times each configuration in its own trial, minutes apart from the others.
On a CPU the speed of the same configuration drifts by tens of percent between runs a few minutes
apart (throughput_resolution_smoke on an otherwise idle 2-core machine: attention/sdpa at 32 px
3,744 and 5,575 images/s in two runs), so a ratio of two trials' numbers measures the drift as
much as the mixers: SSoG/attention ratios of that study came out 2-71 % away from the same
configurations timed together by `vitscale bench` (whose two runs agreed within 5 %). Only
iterations interleaved with each other see the same machine (see `bench.runner`), so the ratio a
report draws conclusions from is the one taken inside the candidate's own trial.

A paired trial (`runner.measure_paired`) measures the candidate's memory alone in one worker
process (its peak above that worker's idle peak, glibc's malloc defaults), then times the candidate
and every attention backend of the study at the same regime and resolution round-robin in a
second worker (the timing one, with `allocator`'s setting), as `vitscale bench` does a cell. The candidate's record keeps its own
timing from the round-robin and adds, per backend B, `paired_ratio_B` (candidate images/s ÷
attention/B images/s), `paired_cpu_ratio_B` (the same from CPU time per batch) and
`paired_margin_B` (both sides' repeat spreads added, `bench.margin`). Attention trials are the
references themselves: the same two workers, timed alone. Default: paired when timing on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from vitscale.bench.margin import ratio_margin
from vitscale.models.registry import BASELINE

PAIRED_PREFIXES = ("paired_ratio_", "paired_cpu_ratio_", "paired_margin_")


def is_paired(config, device: str) -> bool:
    """`benchmark.paired`, resolved: on when timing on the CPU unless the study says otherwise."""
    return device == "cpu" if config.paired is None else config.paired


def references(config, point: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The attention configurations a candidate is timed beside: every backend of the study at
    the point's regime, resolution and variant (its dtype, batch size and compile flag); none for
    attention itself or a study without attention."""
    if point["mixer"] == BASELINE or BASELINE not in config.mixers:
        return []
    return [
        {**point, "mixer": BASELINE, "attention_backend": backend} for backend in config.attention_backends
    ]


def paired_metrics(own: Mapping[str, Any], refs: list[Mapping[str, Any]]) -> dict[str, float]:
    """The candidate's ratios to each reference timed beside it (only where both timings are ok)."""
    out: dict[str, float] = {}
    if own.get("status") != "ok":
        return out
    for ref in refs:
        if ref.get("status") != "ok" or not ref.get("images_per_second"):
            continue
        backend = ref["attention_backend"]
        out[f"paired_ratio_{backend}"] = own["images_per_second"] / ref["images_per_second"]
        if own.get("cpu_ms") and ref.get("cpu_ms"):
            out[f"paired_cpu_ratio_{backend}"] = ref["cpu_ms"] / own["cpu_ms"]
        margin = ratio_margin(own.get("latency_spread"), ref.get("latency_spread"))
        if margin is not None:
            out[f"paired_margin_{backend}"] = margin
    return out


def is_paired_metric(name: str) -> bool:
    return name.startswith(PAIRED_PREFIXES)
