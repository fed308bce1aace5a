"""A study's trial runs, read from MLflow (or a runs.parquet snapshot) into one pyarrow Table.

The table is the single input of every later step, so an analysis redrawn offline from the
snapshot is byte-for-byte the analysis drawn from MLflow. Layout: vitscale.tracking.layout.

The snapshot (write_snapshot, read_snapshot): runs.parquet, the runs table written once and read
back, so `vitscale analyze --from` redraws an analysis offline exactly as it was made from MLflow.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from vitscale.analysis.load.context import parent_context, parent_searchers
from vitscale.errors import UserError
from vitscale.tracking import layout, store
from vitscale.tracking.layout import DEFAULT_TRACKING_URI
from vitscale.tracking.store import PAGE_SIZE, search_all

BASE_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("run_id", pa.string()),
    ("parent_run_id", pa.string()),
    ("trial_id", pa.string()),
    ("status", pa.string()),
    ("failure_reason", pa.string()),
    ("stopped_early", pa.bool_()),
    ("kind", pa.string()),
    ("config_key", pa.string()),
    ("node_id", pa.string()),
    ("start_time", pa.int64()),
)
# Columns added later: a snapshot written before them reads back with nulls (unknown).
LATER_COLUMNS: tuple[tuple[str, pa.DataType], ...] = (
    ("did_not_train", pa.bool_()),  # null: no tag (older runs); see analysis.load.outcomes
    ("phase", pa.string()),  # comparison studies: "tune" | "final"
    ("arm", pa.string()),
)
_INT = re.compile(r"[+-]?\d+")
# runs.parquet's schema metadata: the snapshot's own keys (bytes, as pyarrow keeps them; not MLflow
# names), what `--from` reads a snapshot back with.
META_STUDY = b"vitscale.study"
META_KIND = b"vitscale.kind"
META_PARAM_COLUMNS = b"vitscale.param_columns"
META_METRIC_COLUMNS = b"vitscale.metric_columns"
META_PARENT_RUN_IDS = b"vitscale.parent_run_ids"
META_CONTEXT = b"vitscale.context"


@dataclass
class StudyRuns:
    """The trial runs of one study plus what is needed to name and log the analysis."""

    study: str
    kind: str  # the study kind (vitscale.kinds): "train" | "benchmark" | "comparison"
    table: pa.Table
    parent_run_ids: list[str] = field(default_factory=list)  # newest first
    tracking_uri: str | None = None
    context: dict = field(default_factory=dict)  # parent-run facts: reference arm, search space

    @property
    def param_columns(self) -> list[str]:
        return json.loads(self.table.schema.metadata[META_PARAM_COLUMNS])

    @property
    def metric_columns(self) -> list[str]:
        return json.loads(self.table.schema.metadata[META_METRIC_COLUMNS])


def parse_param_column(values: list[str | None]) -> pa.Array:
    """MLflow stores params as strings: give each column back its type (bool, int, float, string)."""
    clean = [None if v is None or v in ("None", "null") else v for v in values]
    present = [v for v in clean if v is not None]
    if not present:
        return pa.array(clean, pa.string())
    if all(v.lower() in ("true", "false") for v in present):
        return pa.array([None if v is None else v.lower() == "true" for v in clean], pa.bool_())
    if all(_INT.fullmatch(v) for v in present) and all(abs(int(v)) < 2**63 for v in present):
        return pa.array([None if v is None else int(v) for v in clean], pa.int64())
    try:
        return pa.array([None if v is None else float(v) for v in clean], pa.float64())
    except ValueError:
        return pa.array(clean, pa.string())


def runs_to_table(runs: list[Any], study: str, kind: str | None = None) -> pa.Table:
    """MLflow `Run`s (already deduplicated) -> the snapshot table with typed params and final metrics
    (`params` and `flops_per_image` among the metrics, whether a run logged them as params or metrics)."""
    runs = sorted(runs, key=lambda r: (r.data.tags.get(layout.TRIAL_ID) or r.info.run_id, r.info.run_id))
    columns = BASE_COLUMNS + LATER_COLUMNS
    cols: dict[str, list] = {name: [] for name, _ in columns}
    for run in runs:
        tags = run.data.tags
        cols["run_id"].append(run.info.run_id)
        cols["parent_run_id"].append(tags.get(layout.PARENT_RUN_ID))
        cols["trial_id"].append(tags.get(layout.TRIAL_ID) or run.info.run_id)
        cols["status"].append(tags.get(layout.STATUS) or run.info.status)
        cols["failure_reason"].append(tags.get(layout.FAILURE_REASON) or None)
        cols["stopped_early"].append(str(tags.get(layout.STOPPED_EARLY, "false")).lower() == "true")
        cols["kind"].append(tags.get(layout.KIND))
        cols["config_key"].append(tags.get(layout.CONFIG_KEY) or None)
        cols["node_id"].append(tags.get(layout.NODE_ID) or None)
        cols["start_time"].append(run.info.start_time)
        dnt = str(tags.get(layout.DID_NOT_TRAIN, "")).lower()
        cols["did_not_train"].append({"true": True, "false": False}.get(dnt))
        cols["phase"].append(tags.get(layout.PHASE) or None)
        cols["arm"].append(tags.get(layout.ARM) or None)
    arrays = {name: pa.array(cols[name], typ) for name, typ in columns}
    # Metrics with the constants (params, flops_per_image) a run logged as params (older runs: metrics).
    values = [layout.run_values(r.data.metrics, r.data.params) for r in runs]
    # A metric named like a base column (the trainer's `did_not_train`) keeps its value as metric.NAME.
    renamed = {k: (f"metric.{k}" if k in arrays else k) for v in values for k in v}
    metric_keys = sorted(renamed.values())
    constants = set(layout.CONSTANT_METRICS)
    param_keys = sorted({k for r in runs for k in r.data.params if k not in constants})
    taken = set(arrays) | set(metric_keys)
    param_names = []
    for key in param_keys:
        name = key if key not in taken else f"param.{key}"
        param_names.append(name)
        arrays[name] = parse_param_column([r.data.params.get(key) for r in runs])
    for key, name in sorted(renamed.items(), key=lambda kv: kv[1]):
        arrays[name] = pa.array([v.get(key, float("nan")) for v in values], pa.float64())
    table = pa.table(arrays) if runs else pa.table(arrays, schema=pa.schema(list(columns)))
    if kind is None:
        kind = _infer_kind(table, param_names)
    return with_metadata(table, study=study, kind=kind, params=param_names, metrics=metric_keys)


def _infer_kind(table: pa.Table, params: list[str]) -> str:
    kinds = Counter(k for k in table.column("kind").to_pylist() if k)
    if kinds:
        return kinds.most_common(1)[0][0]
    return "benchmark" if any(p.startswith("bench.") for p in params) else "train"


def with_metadata(
    table: pa.Table,
    *,
    study: str,
    kind: str,
    params: list[str],
    metrics: list[str],
    parents: list[str] | None = None,
    context: dict | None = None,
) -> pa.Table:
    meta = {
        META_STUDY: study,
        META_KIND: kind,
        META_PARAM_COLUMNS: json.dumps(params),
        META_METRIC_COLUMNS: json.dumps(metrics),
        META_PARENT_RUN_IDS: json.dumps(parents or []),
        META_CONTEXT: json.dumps(context or {}, sort_keys=True, default=str),
    }
    return table.replace_schema_metadata({k: v.encode() for k, v in meta.items()})


# --- MLflow ---------------------------------------------------------------------------------------


def load_study_runs(study: str, tracking_uri: str | None = None, experiment: str | None = None) -> StudyRuns:
    """All trial runs of every parent run of `study`, deduplicated by trial id (newest run wins)."""
    uri = tracking_uri or DEFAULT_TRACKING_URI
    _check_store(study, uri)
    client = store.client_for(uri)
    try:
        parents = _find_parents(client, study, experiment)
        if not parents:
            raise UserError(_missing(study, uri))
        children: dict[str, Any] = {}
        for parent in parents:
            filt = f"tags.`{layout.PARENT_RUN_ID}` = '{parent.info.run_id}'"
            for run in search_all(client, [parent.info.experiment_id], filt):
                if run.data.tags.get(layout.ROLE, "trial") == "trial":
                    children[run.info.run_id] = run
    except store.mlflow_exception() as exc:
        raise UserError(f"cannot read the MLflow store at {uri}: {_first_line(exc)}") from None
    except OSError as exc:  # requests' ConnectionError is an OSError
        raise UserError(f"cannot reach the MLflow tracking server at {uri}: {_first_line(exc)}") from None
    runs = dedupe_by_trial(list(children.values()))
    if not runs:
        raise UserError(
            f"study '{study}' has a parent run but no trial runs in {uri}; "
            f"run it with `vitscale study run` first"
        )
    newest = parents[0]
    table = runs_to_table(runs, study, kind=newest.data.tags.get(layout.KIND))
    return StudyRuns(
        study=study,
        kind=table.schema.metadata[META_KIND].decode(),
        table=table,
        parent_run_ids=[p.info.run_id for p in parents],
        tracking_uri=uri,
        context={**parent_context(client, newest), "searchers": parent_searchers(parents)},
    )


def dedupe_by_trial(runs: list[Any]) -> list[Any]:
    """A resumed study may hold a trial twice (one run per parent): keep the newest run per trial id."""
    best: dict[str, Any] = {}
    for run in runs:
        key = run.data.tags.get(layout.TRIAL_ID) or run.info.run_id
        rank = (run.info.start_time or 0, run.info.end_time or 0, run.info.run_id)
        old = best.get(key)
        if old is None or rank > (old.info.start_time or 0, old.info.end_time or 0, old.info.run_id):
            best[key] = run
    return list(best.values())


def _find_parents(client: Any, study: str, experiment: str | None) -> list[Any]:
    """Parent runs of the study, newest first: in its experiment, else in any experiment."""
    quoted = study.replace("'", "\\'")
    filt = f"tags.`{layout.ROLE}` = 'study' AND tags.`{layout.STUDY}` = '{quoted}'"
    exp = client.get_experiment_by_name(experiment or study)
    parents = search_all(client, [exp.experiment_id], filt) if exp else []
    if not parents:
        ids, token = [], None
        while True:
            page = client.search_experiments(max_results=PAGE_SIZE, page_token=token)
            ids += [e.experiment_id for e in page]
            token = page.token
            if not token:
                break
        for i in range(0, len(ids), 100):
            parents += search_all(client, ids[i : i + 100], filt)
    return sorted(parents, key=lambda r: (r.info.start_time or 0, r.info.run_id), reverse=True)


def _check_store(study: str, uri: str) -> None:
    """Fail with one line before MLflow retries for minutes (server) or creates an empty store (file)."""
    if uri.startswith(("http://", "https://")):
        store.check_tracking_uri(uri)
    elif uri.startswith("sqlite:///"):
        if not Path(uri.removeprefix("sqlite:///")).is_file():
            raise UserError(_missing(study, uri) + " (the store does not exist)")
        store.check_tracking_uri(uri)  # a damaged file: one line
    elif uri.startswith("file:") or "://" not in uri:
        if not Path(uri.removeprefix("file://").removeprefix("file:")).is_dir():
            raise UserError(_missing(study, uri) + " (the store does not exist)")


def _missing(study: str, uri: str) -> str:
    return (
        f"study '{study}' not found in MLflow at {uri}; run it first with `vitscale study run FILE` "
        f"(the YAML whose `name:` is {study}), or pass the store with --tracking-uri"
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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
    if missing or META_STUDY not in meta:
        raise UserError(f"--from: {path} is not a vitscale runs snapshot (missing {missing or 'metadata'})")
    for name, typ in LATER_COLUMNS:
        if name not in table.column_names:
            table = table.append_column(name, pa.nulls(table.num_rows, typ))
    return StudyRuns(
        study=meta[META_STUDY].decode(),
        kind=meta[META_KIND].decode(),
        table=table.replace_schema_metadata(meta),
        parent_run_ids=json.loads(meta[META_PARENT_RUN_IDS]),
        context=json.loads(meta.get(META_CONTEXT, b"{}")),
    )
