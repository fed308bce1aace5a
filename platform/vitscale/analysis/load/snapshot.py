"""runs.parquet: the runs table written once and read back, so `vitscale analyze --from` redraws
an analysis offline exactly as it was made from MLflow."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vitscale.analysis.load.runs import BASE_COLUMNS, LATER_COLUMNS, StudyRuns, with_metadata
from vitscale.errors import UserError


def write_snapshot(runs: StudyRuns, path: Path) -> Path:
    """Write runs.parquet; the schema metadata carries study, kind, parents and column roles."""
    path.parent.mkdir(parents=True, exist_ok=True)
    table = with_metadata(
        runs.table,
        study=runs.study,
        kind=runs.kind,
        params=runs.param_columns,
        metrics=runs.metric_columns,
        parents=runs.parent_run_ids,
        context=runs.context,
    )
    pq.write_table(table, path)
    return path


def read_snapshot(path: Path) -> StudyRuns:
    """Read a runs.parquet snapshot written by `write_snapshot` (no MLflow needed)."""
    if not path.is_file():
        raise UserError(f"--from: no such file {path}; pass a runs.parquet written by `vitscale analyze`")
    try:
        table = pq.read_table(path)
    except (pa.ArrowInvalid, OSError) as exc:
        raise UserError(f"--from: {path} is not a Parquet file ({exc})") from None
    meta = table.schema.metadata or {}
    missing = [n for n, _ in BASE_COLUMNS if n not in table.column_names]
    if missing or b"vitscale.study" not in meta:
        raise UserError(f"--from: {path} is not a vitscale runs snapshot (missing {missing or 'metadata'})")
    for name, typ in LATER_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, typ))
    return StudyRuns(
        study=meta[b"vitscale.study"].decode(),
        kind=meta[b"vitscale.kind"].decode(),
        table=table.replace_schema_metadata(meta),
        parent_run_ids=json.loads(meta[b"vitscale.parent_run_ids"]),
        context=json.loads(meta.get(b"vitscale.context", b"{}")),
    )
