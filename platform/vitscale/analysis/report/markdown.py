"""Markdown building blocks of report.md: numbers with intervals, SI units, tables."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np


def pm(
    mean: float, ci: float, n: int | float, scale: float = 1.0, digits: int = 2, signed: bool = False
) -> str:
    """'71.23 ± 1.30 (n=2)' ('+3.10 ± ...' when `signed`); no ± for a single run; '—' when nothing finished."""
    if not np.isfinite(mean):
        return "—"
    text = f"{mean * scale:{'+' if signed else ''}.{digits}f}"
    if np.isfinite(ci):
        text += f" ± {ci * scale:.{digits}f}"
    return f"{text} (n={int(n)})"


def si(value: float) -> str:
    """1234567 -> '1.23 M'."""
    if not np.isfinite(value):
        return "—"
    for div, unit in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= div:
            return f"{value / div:.3g} {unit}"
    return f"{value:.3g}"


def num(value, digits: int = 4) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.{digits}g}" if isinstance(value, float) else str(value)


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
    ]


OUTCOME_WORDS = (
    ("n_failed", "failed"),
    ("n_stopped_early", "stopped early"),
    ("n_killed", "killed"),
    ("n_other", "other"),
    ("n_did_not_train", "did not train"),
    ("n_did_not_train_unknown", "did-not-train unknown"),
)


def outcomes(counts: dict) -> str:
    """'3/4 used, 1 failed, 1 did not train': the runs behind a number (zero counts left out)."""
    if not counts:
        return "—"
    parts = [f"{counts['n_used']}/{counts['n_runs']} used"]
    parts += [f"{counts[k]} {word}" for k, word in OUTCOME_WORDS if counts.get(k)]
    return ", ".join(parts)


def figure(path: Path, out_dir: Path) -> list[str]:
    """A PNG embedded by its path relative to the report, with a link to its SVG."""
    rel = path.relative_to(out_dir).as_posix()
    return [f"![{path.stem.replace('_', ' ')}]({rel}) ([svg]({rel[:-4]}.svg))", ""]
