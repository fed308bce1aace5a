"""Tables kept beside runs.parquet (predictions.parquet, curves.parquet): what a step read from
MLflow for some runs, written once so `--from runs.parquet` redraws the same analysis offline.
Written only when it has rows; read back with its columns checked (no file: an older snapshot,
no rows)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from vitscale.errors import UserError


@dataclass(frozen=True)
class SideTable:
    """One such table: its file name, its schema and what its rows are (for error messages)."""

    file: str
    schema: pa.Schema
    what: str  # "predictions", "curves"

    def empty(self) -> pa.Table:
        return self.schema.empty_table()

    def write(self, table: pa.Table, path: Path) -> Path | None:
        """Write the table to `path`, or remove a stale file there when it has no rows."""
        if table.num_rows == 0:
            path.unlink(missing_ok=True)
            return None
        pq.write_table(table, path)
        return path

    def read(self, path: Path) -> pa.Table:
        """The table as `write` left it; no file: no rows."""
        if not path.is_file():
            return self.empty()
        try:
            table = pq.read_table(path)
        except (pa.ArrowInvalid, OSError) as exc:
            raise UserError(
                f"{path} is not a Parquet file ({exc}); delete it or redraw from MLflow"
            ) from None
        missing = [f.name for f in self.schema if f.name not in table.column_names]
        if missing:
            raise UserError(f"{path} is not a vitscale {self.what} table (missing {missing})")
        return table.select(self.schema.names).cast(self.schema)
