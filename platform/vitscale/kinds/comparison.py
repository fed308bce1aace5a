"""`kind: comparison`: every arm (a combination of `arms:` values) is tuned as a train study of its
own with the same budget, then each arm's best point is re-run over fresh seeds (the final phase)
and the arms are compared on test. Its trials train like a train study's; what differs is the
phases (`study.comparison`, `tune.comparison`) and the report's section on whether a low-fidelity
tuning ranking transferred."""

from __future__ import annotations

from dataclasses import replace

from vitscale.kinds.registry import register_kind
from vitscale.kinds.train import TRAIN


def _after_arms(sections: tuple[str, ...], name: str) -> tuple[str, ...]:
    at = sections.index("arms") + 1
    return (*sections[:at], name, *sections[at:])


COMPARISON = register_kind(
    replace(
        TRAIN,
        name="comparison",
        title="Comparison",
        # whether the arms' low-fidelity ranking held at full fidelity (tune.confirmation)
        report_sections=_after_arms(TRAIN.report_sections, "transfer"),
    )
)
