"""Name -> DistributionFacts: what a search-space distribution is, as plain data.

`study.distributions` builds its registered distributions (validation, values, Optuna suggestions)
on these facts; the analysis, which may not import `study`, reads the same facts to interpret a
study's logged `space` (is a tuned value at the edge of its range, which Optuna distribution
fANOVA should see). One table, so the two layers cannot disagree about what `loguniform` means.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DistributionFacts:
    """One distribution of a space entry (`{choice: [...]}`, `{int: [1, 8]}`, ...)."""

    name: str  # its key in a space entry
    listed: bool  # given as a list of values (choice, grid); else as a [low, high] range
    integer: bool  # a range of whole numbers
    log_scale: bool  # a range sampled on a log scale (loguniform; an int range only with `log: true`)
    continuous: bool  # no finite list of values: samplers only, never a grid
    grid_only: bool  # its values are for grid studies only (samplers take choice)


DISTRIBUTION_FACTS: dict[str, DistributionFacts] = {
    facts.name: facts
    for facts in (
        DistributionFacts(
            "choice", listed=True, integer=False, log_scale=False, continuous=False, grid_only=False
        ),
        DistributionFacts(
            "grid", listed=True, integer=False, log_scale=False, continuous=False, grid_only=True
        ),
        DistributionFacts(
            "int", listed=False, integer=True, log_scale=False, continuous=False, grid_only=False
        ),
        DistributionFacts(
            "uniform", listed=False, integer=False, log_scale=False, continuous=True, grid_only=False
        ),
        DistributionFacts(
            "loguniform", listed=False, integer=False, log_scale=True, continuous=True, grid_only=False
        ),
    )
}
