"""`python -m vitscale ...` (what a submitted Ray job runs when no console script is on PATH)."""

from vitscale.cli import entry

entry()
