"""What the analysis does per study kind beyond its steps and sections: `ANALYSIS_KINDS`, kind
name -> `AnalysisKind`.

A kind lists the steps and report sections it runs by name (`StudyKind.analysis_steps`,
`report_sections`; `steps.STEPS`, `report.sections.SECTIONS`); what else differs — whether its
arms come from final runs, the headline numbers of `vitscale analyze`'s summary table and its
columns — is its entry here, registered by the modules of this package (imported on the
table's first lookup). A plugin kind registers its own with `ANALYSIS_KINDS.register(name, ...)`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from vitscale.kinds.table import KindTable


@dataclass(frozen=True)
class AnalysisKind:
    """One kind's part of the analysis."""

    # Whether its tables, fronts and arms are drawn from final runs (a comparison's re-runs of each
    # arm's tuned recipe over fresh seeds), given its runs table.
    arms_from_final: Callable[[pa.Table], bool]
    # The headline of one summary row: (AnalysisResult, its aggregate rows, n_used per row) -> values.
    headline: Callable[[Any, list[int], np.ndarray], dict[str, Any]]
    # `vitscale analyze`'s summary table: (row key, header, scale, format spec; "" = str(value)).
    summary_columns: tuple[tuple[str, str, float, str], ...]


ANALYSIS_KINDS: KindTable[AnalysisKind] = KindTable(
    "analysis entry (vitscale.analysis.kinds.AnalysisKind)",
    "vitscale.analysis.kinds.ANALYSIS_KINDS.register(name, AnalysisKind(...))",
    builtin=tuple(f"vitscale.analysis.kinds.{name}" for name in ("train", "benchmark", "comparison")),
)
