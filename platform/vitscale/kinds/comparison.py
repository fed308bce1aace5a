"""`kind: comparison`: every arm (a combination of `arms:` values) is tuned as a train study of its
own with the same budget, then each arm's best point is re-run over fresh seeds (the final phase)
and the arms are compared on test. Its trials train like a train study's; what differs is the
phases (`study.comparison`, `tune.comparison`)."""

from __future__ import annotations

from dataclasses import replace

from vitscale.kinds.registry import register_kind
from vitscale.kinds.train import TRAIN

COMPARISON = register_kind(replace(TRAIN, name="comparison", title="Comparison", searches=False, phased=True))
