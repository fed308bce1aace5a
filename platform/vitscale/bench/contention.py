"""Was a CPU timing contended? Its process CPU time against its wall time and threads.

Over the timed iterations, `cpu_wall_ratio` = process CPU time ÷ (wall time × threads): 1 when
every thread it was given ran throughout. A timing that shares its cores with other work spends
part of its wall time descheduled and lands well below 1 (the issue that made this: SSoG at 64 px,
16.7 ms wall against 2.65 ms of CPU time, 0.16); above 1 more threads ran than it was given. With
several threads a ratio below 1 can also be threads idling through serial parts, so it reads
"shared cores or idle threads". Wall-clock throughput of a contended timing includes the time it
waited; its CPU-time throughput (`cpu_ms`) does not.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

CONTENDED_BELOW = 0.8  # CPU time under 80 % of wall × threads: descheduled a fifth of the time
CONTENDED_ABOVE = 1.25  # over 125 %: more threads ran than the timing was given
RULE = (
    "CPU time over the timed iterations ÷ (wall time × threads), 1 when every thread ran "
    f"throughout; outside {CONTENDED_BELOW:g}–{CONTENDED_ABOVE:g} a timing shared its cores"
)


def cpu_wall_ratio(cpu_seconds: list[float], wall_seconds: list[float], threads: int) -> float | None:
    """Σ CPU ÷ (Σ wall × threads) over the timed iterations; None without both or with no wall time."""
    wall = sum(wall_seconds)
    if not cpu_seconds or wall <= 0 or threads < 1:
        return None
    return sum(cpu_seconds) / (wall * threads)


def is_contended(ratio: float | None) -> bool:
    """A ratio far from 1 (see the module docstring); False where none was measured (CUDA)."""
    return ratio is not None and not CONTENDED_BELOW <= ratio <= CONTENDED_ABOVE


def contention_note(record: Mapping[str, Any]) -> str | None:
    """'cpu/wall 0.16 of 1 thread' for a contended CPU record, else None."""
    ratio = record.get("cpu_wall_ratio")
    if not isinstance(ratio, int | float) or not is_contended(float(ratio)):
        return None
    threads = record.get("threads")
    return f"cpu/wall {ratio:.2f} of {threads or '?'} thread{'' if threads == 1 else 's'}"


def contention_caveat(ratios: Iterable[float | None]) -> str | None:
    """A sweep's CPU timings in one sentence, worded once for the report (*Contended timings*) and
    the terminal summary of a benchmark study: how many were contended and what that does to their
    throughput, or that none was. None where no CPU timing was measured (CUDA)."""
    measured = [float(r) for r in ratios if isinstance(r, int | float) and math.isfinite(r)]
    if not measured:
        return None
    flagged = sum(is_contended(r) for r in measured)
    span = f"{min(measured):.2f}–{max(measured):.2f}"
    if not flagged:
        return f"None: all {len(measured)} CPU timings kept their threads busy ({RULE}; here {span})."
    return (
        f"{flagged} of {len(measured)} CPU timings were contended ({RULE}; here {span}): their "
        "wall-clock images/s include time spent waiting for a core, so ratios that involve them are "
        "not the mixers' own."
    )
