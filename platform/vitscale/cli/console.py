"""The console a command prints its tables and lines to.

On a terminal: the terminal's width. Piped or redirected (a log file, `tee`, CI), Rich would
assume 80 columns and fold a table's cells mid-number (`weight_decay=0.0083` over two lines); there
it is wide instead, so every table keeps its natural width and every line stays one line. COLUMNS,
where set, decides either way.
"""

from __future__ import annotations

import os
import sys

from rich.console import Console

WIDE = 1000  # columns without a terminal: wider than any table or line a command prints


def stdout_console() -> Console:
    """Rich's console for standard output: the terminal's width, else (no terminal) WIDE."""
    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=WIDE)
