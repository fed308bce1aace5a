"""Submitted studies as the laptop sees them: one row per Ray job, with its study's progress.

A Ray job and its study are linked twice. The job's metadata, written by `study submit` and
`study resume --address`, names the study, its planned trials, tracking URI and experiment. The
study's parent run in MLflow is tagged by the job's driver with the job's submission id (`JOBS`,
read from the job config Ray hands the driver; a resume appends its own) and the planned trial
count. `status` joins them: trials done (child runs FINISHED or FAILED) / planned. Progress is
best effort: an unreachable tracking server leaves it blank rather than failing the listing.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from vitscale.errors import UserError
from vitscale.tracking import layout, store
from vitscale.tune.submit import job_client, last_tracking_uri
from vitscale.tune.summary import child_runs

META_STUDY = "vitscale_study"
META_COMMAND = "vitscale_command"  # "run" | "resume"
META_TRIALS = "vitscale_trials"
META_URI = "vitscale_tracking_uri"
META_EXPERIMENT = "vitscale_experiment"
DONE = ("FINISHED", "FAILED")
COLUMNS = ("job id", "study", "status", "started", "time", "trials")


def current_job_id() -> str | None:
    """The submission id of the Ray job this driver runs in, or None outside a submitted job."""
    try:
        config = json.loads(os.environ.get("RAY_JOB_CONFIG_JSON_ENV_VAR") or "{}")
    except ValueError:
        return None
    return (config.get("metadata") or {}).get("job_submission_id")


def tag_parent_run(client, run_id: str, planned: int | None = None) -> None:
    """Driver side: record the planned trials and this job's id on the study's parent run."""
    tags: dict[str, str] = {}
    if planned is not None:
        tags[layout.PLANNED_TRIALS] = str(planned)
    job = current_job_id()
    if job:
        ids = client.get_run(run_id).data.tags.get(layout.JOBS, "").split()
        if job not in ids:
            tags[layout.JOBS] = " ".join([*ids, job])
    if tags:
        store.set_tags(client, run_id, tags)


def status(address: str | None, job_id: str | None, tracking_uri: str | None = None) -> list[dict]:
    """Every job of the cluster (or one), oldest first, as plain dicts (what `--json` prints)."""
    client = job_client(address)
    jobs = [client.get_job_info(job_id)] if job_id else client.list_jobs()
    jobs = sorted(jobs, key=lambda j: j.start_time or float("inf"))
    fallback_uri = tracking_uri or os.environ.get(layout.TRACKING_URI_ENV) or last_tracking_uri()
    progress = _Progress()
    rows = []
    for job in jobs:
        meta = job.metadata or {}
        study = meta.get(META_STUDY) or None
        if study and study.endswith((".yaml", ".yml")):  # jobs submitted by older versions
            study = Path(study).stem
        ident = job.submission_id or job.job_id
        done, planned = (None, None)
        if study:
            uri = meta.get(META_URI) or fallback_uri
            done, planned = progress.of(uri, ident, meta.get(META_EXPERIMENT))
            planned = int(meta[META_TRIALS]) if _is_count(meta.get(META_TRIALS, "")) else planned
        end = job.end_time or (time.time() * 1000 if job.start_time else None)
        rows.append(
            {
                "job_id": ident,
                "study": study,
                "command": meta.get(META_COMMAND),
                "status": str(getattr(job.status, "value", job.status)),
                "start_time": _iso(job.start_time),
                "end_time": _iso(job.end_time),
                "duration_s": round((end - job.start_time) / 1000) if job.start_time else None,
                "trials_done": done,
                "trials_planned": planned,
                "entrypoint": job.entrypoint,
                "message": job.message or "",
            }
        )
    return rows


class _Progress:
    """Trials done / planned per job from MLflow, one server probe and experiment list per URI."""

    def __init__(self) -> None:
        # A listing must not hang on a dead server: MLflow retries for minutes by default.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "10")
        self.clients: dict[str, object] = {}

    def _client(self, uri: str):
        if uri not in self.clients:
            try:
                store.check_tracking_uri(uri, timeout=3.0)
                self.clients[uri] = store.client_for(uri)
            except UserError:
                self.clients[uri] = None
        return self.clients[uri]

    def of(self, uri: str | None, job_id: str, experiment: str | None) -> tuple[int | None, int | None]:
        client = self._client(uri) if uri else None
        if client is None:
            return None, None
        try:
            if experiment:
                found = client.get_experiment_by_name(experiment)
                ids = [found.experiment_id] if found else []
            else:
                ids = [e.experiment_id for e in client.search_experiments(max_results=1000)]
            for start in range(0, len(ids), 100):
                runs = client.search_runs(
                    ids[start : start + 100],
                    filter_string=f"tags.`{layout.JOBS}` LIKE '%{job_id}%'",
                    max_results=1,
                )
                if runs:
                    parent = runs[0]
                    children = child_runs(client, parent.info.experiment_id, parent.info.run_id)
                    done = sum(r.data.tags.get(layout.STATUS) in DONE for r in children)
                    planned = parent.data.tags.get(layout.PLANNED_TRIALS, "")
                    return done, int(planned) if _is_count(planned) else None
        except Exception:  # MLflow's errors vary by store; progress is best effort
            return None, None
        return None, None


def lines(rows: list[dict], width: int = 100) -> list[str]:
    """The table as text lines no wider than `width`: full job ids; long study names are cut."""
    cells = [
        [
            row["job_id"],
            row["study"] or "-",
            row["status"],
            _short_time(row["start_time"]),
            _duration(row["duration_s"]),
            _trials(row["trials_done"], row["trials_planned"]),
        ]
        for row in rows
    ]
    widths = [max([len(c[i]) for c in cells] + [len(COLUMNS[i])]) for i in range(len(COLUMNS))]
    room = width - (sum(widths) - widths[1]) - 2 * (len(COLUMNS) - 1)
    widths[1] = max(min(widths[1], room), len(COLUMNS[1]))
    out = []
    for values in [list(COLUMNS), *cells]:
        study = values[1]
        if len(study) > widths[1]:
            values[1] = study[: widths[1] - 1] + "…"
        parts = [
            v.rjust(w) if i == 5 else v.ljust(w) for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        out.append("  ".join(parts).rstrip())
    return out


def _is_count(text: str) -> bool:
    """'24' yes; '²' no (str.isdigit accepts it, int() does not)."""
    return text.isascii() and text.isdigit()


def _iso(ms: int | None) -> str | None:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(ms / 1000)) if ms else None


def _short_time(iso: str | None) -> str:
    return iso[5:16].replace("T", " ") if iso else "-"


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    days, hours = divmod(hours, 24)
    if days:
        return f"{days}d{hours:02d}h"
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{secs:02d}s"


def _trials(done: int | None, planned: int | None) -> str:
    if done is None and planned is None:
        return "-"
    return f"{'?' if done is None else done}/{'?' if planned is None else planned}"
