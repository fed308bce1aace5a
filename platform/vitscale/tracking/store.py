"""MLflow access for vitscale: check the tracking URI, create the study's parent run, find or
create trial child runs, log params/metrics in batches. Writers (tune callback, bench) and the
analysis share these so the layout in `tracking.layout` is written in one place.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from vitscale import storage_errors
from vitscale.errors import UserError
from vitscale.sqlite_files import check_sqlite
from vitscale.tracking import layout, provenance, store_template

MAX_PARAM_CHARS = 6000
PAGE_SIZE = 1000  # runs per search_runs page
_BATCH = 900  # MLflow accepts at most 1000 metrics / 100 params per log_batch


def is_local_store(uri: str) -> bool:
    """SQLite and file stores live on the driver's disk: a remote cluster cannot write there."""
    return uri.startswith(("sqlite:", "file:", "/", ".")) or "://" not in uri


def check_tracking_uri(uri: str, *, remote_driver: bool = False, timeout: float = 5.0) -> None:
    """Fail early, in one line, when the tracking store cannot be used."""
    if remote_driver and is_local_store(uri):
        raise UserError(
            f"tracking.uri: {uri!r} is a local store that a remote cluster cannot write to; "
            "start an MLflow server (infra/mlflow or infra/local/mlflow-up.sh) and pass "
            "--tracking-uri http://HOST:5000"
        )
    check_sqlite(
        uri,
        "tracking.uri",
        "restore it from a copy, or pass another --tracking-uri (a new file starts an empty store)",
    )
    if uri.startswith(("http://", "https://")):
        try:
            with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout) as resp:
                resp.read()
        except urllib.error.HTTPError:
            return  # something answers (e.g. behind a proxy): MLflow's own errors say more
        except (urllib.error.URLError, OSError) as exc:
            raise UserError(
                f"tracking.uri: cannot reach the MLflow server at {uri} ({exc}); start it "
                "(infra/local/mlflow-up.sh) or pass another --tracking-uri"
            ) from None


def resolve_tracking_uri(given: str | None = None, configured: str | None = None) -> str:
    """The store to use: `given` (a flag), else $VITSCALE_TRACKING_URI, else `configured` (a study's
    `tracking.uri`), else sqlite:///mlflow.db."""
    return given or os.environ.get(layout.TRACKING_URI_ENV) or configured or layout.DEFAULT_TRACKING_URI


@contextlib.contextmanager
def quiet_artifact_progress():
    """MLflow draws a tqdm bar for every artifact download, even of one small file, into the
    terminal of `analyze` and into trial logs; off for the duration (a value the user set wins)."""
    key = "MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR"
    if key in os.environ:
        yield
        return
    os.environ[key] = "false"
    try:
        yield
    finally:
        os.environ.pop(key, None)


def artifact_text(client: Any, run_id: str, path: str) -> str:
    """One small text artifact of a run (a study's spec, its comparison record), read without a bar."""
    with tempfile.TemporaryDirectory() as folder, quiet_artifact_progress():
        return Path(client.download_artifacts(run_id, path, folder)).read_text()


def refuse_file_store(uri: str) -> None:
    """MLflow 3.17 raises (with a traceback) on a file store (`file:...`, a bare `./mlruns`) unless
    MLFLOW_ALLOW_FILE_STORE=true; say so in one line, before any run is made."""
    if os.environ.get("MLFLOW_ALLOW_FILE_STORE", "").lower() in ("1", "true"):
        return
    scheme = urlparse(uri).scheme
    if scheme == "file" or (scheme == "" and uri != "databricks"):
        raise UserError(
            f"tracking URI {uri!r} (--tracking-uri, tracking.uri or ${layout.TRACKING_URI_ENV}) is an MLflow "
            "file store, which MLflow no longer opens by default; "
            "use a database such as sqlite:///mlflow.db (`mlflow migrate-filestore` moves old runs), "
            "or set MLFLOW_ALLOW_FILE_STORE=true"
        )


def client_for(uri: str):
    """An MlflowClient; for a SQLite store, created (and its schema made or migrated) under a lock.

    MLflow creates and migrates a SQLite store's schema on first use without any lock between
    processes: two `vitscale train` runs starting on a new store raced ("Online migration expected
    to match one row"). The first use therefore happens under an exclusive file lock next to the
    database; later processes find the schema current and pass through quickly.
    """
    from mlflow import MlflowClient

    refuse_file_store(uri)
    database = Path(uri.removeprefix("sqlite:///").split("?")[0]) if uri.startswith("sqlite:///") else None
    if database is None or not database.parent.is_dir():
        return MlflowClient(tracking_uri=uri)
    # A disk full (or read-only) before the store exists: one line naming it, not SQLAlchemy's 132.
    with storage_errors.as_user_error(str(database)):
        with (database.parent / f".{database.name}.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            fresh = store_template.is_new(database)
            templated = fresh and store_template.start_from_template(database)
            client = MlflowClient(tracking_uri=uri)  # creates / migrates the store (a copy: checks it)
            client.search_experiments(max_results=1)
            if fresh and not templated:
                store_template.keep_as_template(database)
    return client


def ensure_experiment(client, name: str, description: str = "", *, replace_description: bool = True) -> str:
    """The experiment's id, created if missing (tolerating another process creating it meanwhile),
    tagged as model training so MLflow 3's UI opens it on its runs (see layout.EXPERIMENT_KIND).

    `description` (a study's) becomes the experiment's description (its NOTE tag, what the UI
    shows above the runs): on a new experiment, one without a description, or — with
    `replace_description`, for the study's own experiment — one whose description differs. An
    experiment several studies share keeps the first one's."""
    from mlflow.exceptions import MlflowException

    description = description.strip()
    tags = {layout.EXPERIMENT_KIND: layout.EXPERIMENT_KIND_TRAINING}
    if description:
        tags[layout.NOTE] = description
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        try:
            return client.create_experiment(name, tags=tags)
        except MlflowException:
            experiment = client.get_experiment_by_name(name)
            if experiment is None:
                raise
    if experiment.lifecycle_stage == "deleted":
        client.restore_experiment(experiment.experiment_id)
    if experiment.tags.get(layout.NOTE) and not replace_description:
        tags.pop(layout.NOTE, None)
    for key, value in tags.items():
        if experiment.tags.get(key) != value:
            client.set_experiment_tag(experiment.experiment_id, key, value)
    return experiment.experiment_id


def mlflow_exception() -> type[Exception]:
    """MLflow's own error class (`MlflowException`), for readers outside tracking to catch
    (`except store.mlflow_exception():`): MLflow is imported here, on first need, and nowhere else."""
    from mlflow.exceptions import MlflowException

    return MlflowException


def search_all(client: Any, experiment_ids: list[str], filter_string: str) -> list[Any]:
    """`search_runs`, following page tokens until the last page."""
    out, token = [], None
    while True:
        page = client.search_runs(
            experiment_ids, filter_string=filter_string, max_results=PAGE_SIZE, page_token=token
        )
        out.extend(page)
        token = page.token
        if not token:
            return out


def package_versions() -> dict[str, str]:
    out = {}
    for name in ("torch", "ray", "optuna", "mlflow", "torchdiffeq", "vitscale"):
        try:
            out[f"{layout.TAG_PREFIX}version.{name}"] = version(name)
        except PackageNotFoundError:
            out[f"{layout.TAG_PREFIX}version.{name}"] = "absent"
    return out


def create_study_run(
    client,
    experiment_id: str,
    study: str,
    kind: str,
    spec_hash: str,
    spec_yaml: str,
    run_name: str | None = None,
    *,
    description: str = "",
    source: str = "",
) -> str:
    """The parent run of one study execution: tagged (provenance included, see
    tracking.provenance), its description as the run's note, holding the resolved spec,
    requirements.txt and, for a dirty checkout, git.diff."""
    captured = provenance.capture(source or f"vitscale study {study}")
    tags = {
        layout.ROLE: "study",
        layout.STUDY: study,
        layout.KIND: kind,
        layout.SPEC_HASH: spec_hash,
        **captured.tags(),
        **package_versions(),
    }
    if description.strip():
        tags[layout.NOTE] = description.strip()
    run = client.create_run(experiment_id, tags=tags, run_name=run_name or study)
    client.log_text(run.info.run_id, spec_yaml, "spec.yaml")
    provenance.log_to_parent(client, run.info.run_id, captured)
    return run.info.run_id


def create_child_run(
    client,
    experiment_id: str,
    parent_run_id: str,
    study: str,
    kind: str,
    trial_id: str,
    run_name: str,
    tags: Mapping[str, str] | None = None,
) -> str:
    all_tags = {
        layout.PARENT_RUN_ID: parent_run_id,
        layout.ROLE: "trial",
        layout.STUDY: study,
        layout.KIND: kind,
        layout.TRIAL_ID: trial_id,
        layout.STATUS: "RUNNING",
        **(tags or {}),
    }
    return client.create_run(experiment_id, tags=all_tags, run_name=run_name).info.run_id


def log_params(client, run_id: str, params: Mapping[str, Any]) -> None:
    from mlflow.entities import Param

    items = [Param(k, str(v)[:MAX_PARAM_CHARS]) for k, v in params.items()]
    for i in range(0, len(items), 100):
        client.log_batch(run_id, params=items[i : i + 100])


def log_metrics(client, run_id: str, metrics: Mapping[str, Any], step: int) -> None:
    """Numeric values only (strings and None are skipped); one timestamp for the whole step."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    items = [
        Metric(k, float(v), now, step)
        for k, v in metrics.items()
        if isinstance(v, int | float) and not isinstance(v, bool)
    ]
    for i in range(0, len(items), _BATCH):
        client.log_batch(run_id, metrics=items[i : i + _BATCH])


def set_tags(client, run_id: str, tags: Mapping[str, Any]) -> None:
    from mlflow.entities import RunTag

    client.log_batch(run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])


def last_logged_step(client, run_id: str, key: str = layout.STEP_METRIC) -> int:
    """The last epoch MLflow holds of a run (-1: none), from a metric every epoch logs."""
    history = client.get_metric_history(run_id, key)
    return max((m.step for m in history), default=-1)
