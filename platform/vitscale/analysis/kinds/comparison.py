"""`kind: comparison` in the analysis: a train study's headline, with its arms always drawn from
the final runs (each arm's tuned recipe over fresh seeds), never from the tuning trials that
chose them; with no final runs yet, it has no arms."""

from __future__ import annotations

from dataclasses import replace

import pyarrow as pa

from vitscale.analysis.kinds import ANALYSIS_KINDS
from vitscale.analysis.kinds.train import TRAIN_ANALYSIS


def always_final(runs: pa.Table) -> bool:
    return True


COMPARISON_ANALYSIS = ANALYSIS_KINDS.register(
    "comparison", replace(TRAIN_ANALYSIS, arms_from_final=always_final)
)
