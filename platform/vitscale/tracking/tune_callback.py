"""The Ray Tune callback that writes every trial of a study to MLflow, from the driver.

One writer keeps an embedded SQLite store safe and spares worker nodes a route to the tracking
server. Writes go through the execution's durable write queue (`tracking.queue`, folder
`<execution>/tracking-queue`): a hook returns at once, so Tune's loop and the trials never wait on
the server, and an outage delays writes instead of failing the study. The callback is pickled with
the experiment (for `study resume`), so it keeps only plain values and finds its state again in the
queue's journal: a resumed trial continues its own child run and epochs already logged are not
logged twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray.tune import Callback

from vitscale.tracking import layout, provenance, store, trial_artifacts
from vitscale.tracking.datasets import dataset_inputs

# Keys of a trial's result that are not metrics: defined in layout (a trial worker imports them
# without MLflow), named here too for the driver's readers.
from vitscale.tracking.layout import (  # noqa: F401
    RESULT_DID_NOT_TRAIN,
    RESULT_DISCARDED_CHECKPOINT,
    RESULT_FAILURE_MESSAGE,
    RESULT_FAILURE_REASON,
    RESULT_NODE_ID,
    RESULT_PLANNED_EPOCHS,
    RESULT_SCHEDULE,
)
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT
from vitscale.tracking.queued import QUEUE_DIR, QueuedClient, queued_client

_TUNE_KEYS = {
    "training_iteration",
    "time_this_iter_s",
    "time_total_s",
    "timestamp",
    "time_since_restore",
    "iterations_since_restore",
    "timesteps_total",
    "episodes_total",
    "pid",
    "date",
    "done",
    "timesteps_since_restore",
    RESULT_PLANNED_EPOCHS,
    RESULT_DISCARDED_CHECKPOINT,
    RESULT_SCHEDULE,
}


log = logging.getLogger("vitscale.tracking")

# Tune trial id -> (writer, child run id or placeholder), for this driver process: the sampler
# study records each Optuna trial's MLflow runs (tune.replicates) from here.
CHILD_RUNS: dict[str, tuple[Any, str]] = {}


def mlflow_run_id(trial_id: str, timeout: float = 5.0) -> str | None:
    """The MLflow id of a trial's child run (a placeholder if the server has not taken it yet)."""
    writer, run_id = CHILD_RUNS.get(trial_id, (None, None))
    if writer is None:
        return None
    try:
        return writer.resolve(run_id, timeout)
    except TimeoutError:
        return run_id


_NOT_TUNE_METRICS = {*_TUNE_KEYS, "config"}


def result_metrics(result: dict) -> dict:
    """The MLflow metrics of one Tune result: what changes over epochs. Not Tune's bookkeeping, the
    config, the constants (logged as params at the end: `layout.constant_params`), the epoch (the
    step) nor did_not_train (a tag)."""
    return layout.epoch_metrics({k: v for k, v in result.items() if k not in _NOT_TUNE_METRICS})


def completion_tags(result: dict) -> tuple[dict[str, str], str]:
    """(tags, MLflow status) of a trial Tune finished, from its last result: one place, so a
    completion recorded late (see `tune.summary.close_completed`) reads exactly as on time."""
    reason = result.get(RESULT_FAILURE_REASON) or ""
    planned = result.get(RESULT_PLANNED_EPOCHS)
    epoch = result.get("epoch")
    stopped_early = bool(not reason and planned and epoch is not None and epoch < planned)
    status = "FAILED" if reason else "FINISHED"
    tags = {layout.STATUS: status, layout.STOPPED_EARLY: str(stopped_early).lower()}
    if not reason and RESULT_DID_NOT_TRAIN in result:
        tags[layout.DID_NOT_TRAIN] = str(bool(result[RESULT_DID_NOT_TRAIN])).lower()
    if reason:
        tags[layout.FAILURE_REASON] = f"{reason}: {result.get(RESULT_FAILURE_MESSAGE, '')}".strip(": ")
    return tags, status


def error_text(trial) -> str | None:
    """The text of the trial's last error. Tune writes it into the driver's staging folder and
    copies that to storage only at its next snapshot, after the callbacks have run, so
    `trial.get_error()` (which reads storage) is still empty when `on_trial_error` is called."""
    local = trial.error_file
    if local and Path(local).is_file():
        return Path(local).read_text(errors="replace")
    return trial.get_error()


@dataclass
class TrialDescription:
    """What MLflow shows of a trial before its first result: name, params, replicate group."""

    run_name: str
    params: dict[str, Any]
    config_key: str


class MlflowStudyCallback(Callback):
    def __init__(
        self,
        tracking_uri: str,
        experiment_id: str,
        parent_run_id: str,
        study: str,
        kind: str,
        describe: Callable[[dict], TrialDescription],
        run_tags: dict[str, str] | None = None,
        checkpoints: str = "none",
        objectives: list[tuple[str, str]] | None = None,
        source: str = "",
    ) -> None:
        self.tracking_uri = tracking_uri
        self.source = source  # MLflow's Source column, as the parent run names it (default: the study)
        self.experiment_id = experiment_id
        self.parent_run_id = parent_run_id
        self.study = study
        self.kind = kind
        self.describe = describe
        # Tags every child run repeats from its parent (provenance); captured here when not given.
        self.run_tags = run_tags
        # tracking.checkpoints (best | all | none) and the objectives "best" reads (see trial_artifacts)
        self.checkpoints = checkpoints
        self.objectives = list(objectives or [])
        self._client: QueuedClient | None = None
        self._runs: dict[str, str] = {}
        self._node: dict[str, str] = {}
        self._discarded: dict[str, str] = {}  # run -> the damaged checkpoint its trial restarted past

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        state.update(_client=None, _runs={}, _node={}, _discarded={})
        return state

    def queue_client(self, trials) -> QueuedClient:
        """The execution folder is Tune's experiment folder (storage_path/name, see tune.tuner)."""
        if self._client is None or self._client.queue.closed:
            directory = Path(trials[0].remote_experiment_path) / QUEUE_DIR
            self._client = queued_client(self.tracking_uri, directory)
        return self._client

    # -- runs -------------------------------------------------------------------------------
    def run_id(self, trial) -> str:
        """The trial's child run: found again (in the journal) after a resume, created on first sight."""
        if trial.trial_id in self._runs:
            return self._runs[trial.trial_id]
        client = self.queue_client([trial])
        run_id = client.queue.find(
            **{layout.PARENT_RUN_ID: self.parent_run_id, layout.TRIAL_ID: trial.trial_id}
        )
        if run_id is None:
            description = self.describe(trial.config)
            run_id = store.create_child_run(
                client,
                self.experiment_id,
                self.parent_run_id,
                self.study,
                self.kind,
                trial.trial_id,  # a tag (TRIAL_ID), not part of the name
                run_name=self.run_name(trial, description),
                tags={**self.child_tags(), layout.CONFIG_KEY: description.config_key},
            )
            store.log_params(client, run_id, description.params)
            if any(k.startswith("data.") for k in description.params):
                client.log_inputs(run_id, dataset_inputs(description.params))
        else:
            client.update_run(run_id, status="RUNNING")
            store.set_tags(client, run_id, {layout.STATUS: "RUNNING"})
            # Idempotent (same values): a driver killed between the journal's create and its
            # params would otherwise leave the resumed run without them.
            store.log_params(client, run_id, self.describe(trial.config).params)
        self._runs[trial.trial_id] = run_id
        CHILD_RUNS[trial.trial_id] = (client, run_id)
        return run_id

    def run_name(self, trial, description: TrialDescription) -> str:
        """The child run's name (`layout.run_name`); a comparison phase prefixes phase and arm."""
        return description.run_name

    def child_tags(self) -> dict[str, str]:
        if self.run_tags is None:
            self.run_tags = provenance.capture(self.source or f"vitscale study {self.study}").tags()
        return self.run_tags

    # -- Tune hooks --------------------------------------------------------------------------
    def on_trial_start(self, iteration, trials, trial, **info) -> None:
        self.run_id(trial)

    def on_trial_result(self, iteration, trials, trial, result, **info) -> None:
        run_id = self.run_id(trial)
        client = self.queue_client([trial])
        if result.get(RESULT_NODE_ID) and self._node.get(run_id) != result[RESULT_NODE_ID]:
            # Set again only when it changes: after a restore the trial may run on another node.
            store.set_tags(client, run_id, {layout.NODE_ID: result[RESULT_NODE_ID]})
            self._node[run_id] = result[RESULT_NODE_ID]
        discarded = result.get(RESULT_DISCARDED_CHECKPOINT)
        if discarded and self._discarded.get(run_id) != discarded:
            log.warning("trial %s restarted from epoch 0: damaged checkpoint %s", trial.trial_id, discarded)
            store.set_tags(client, run_id, {layout.DISCARDED_CHECKPOINT: discarded})
            self._discarded[run_id] = discarded
        if result.get(RESULT_FAILURE_REASON):
            return  # the failure report carries no new epoch; on_trial_complete records it
        step = int(result.get("epoch", result.get("training_iteration", 0)))
        if step <= client.queue.steps.get(run_id, -1):
            return  # re-reported after a restore: already queued (or in MLflow)
        metrics = result_metrics(result)
        store.log_metrics(client, run_id, metrics, step=step)

    def on_trial_complete(self, iteration, trials, trial, **info) -> None:
        run_id = self.run_id(trial)
        result = trial.last_result or {}
        tags, status = completion_tags(result)
        client = self.queue_client([trial])
        store.set_tags(client, run_id, tags)
        store.log_params(client, run_id, layout.constant_params(result))
        self.log_trial_files(trial, run_id, checkpoint=self.checkpoints == "all" and status == "FINISHED")
        if result.get(RESULT_SCHEDULE):  # its values changed while it trained (a PBT member, a replay)
            client.log_text(run_id, result[RESULT_SCHEDULE], layout.SCHEDULE_ARTIFACT)
            exploits = sum("cloned_from" in step for step in json.loads(result[RESULT_SCHEDULE]))
            store.set_tags(client, run_id, {layout.EXPLOITS: exploits})
        if status == "FINISHED":
            for path in trial_artifacts.final_predictions(trial):
                client.log_artifact(run_id, str(path), PREDICTIONS_ARTIFACT)
        if status == "FINISHED" and tags[layout.STOPPED_EARLY] == "false":
            self.log_model(trial, run_id, result)
        client.set_terminated(run_id, status)

    def log_model(self, trial, run_id: str, result: dict) -> None:
        """The trial's final model as an MLflow Model of its run, at its last epoch (queued; see
        tracking.logged_model): a trial that ran all its epochs and left one beside its checkpoint."""
        folder = trial_artifacts.final_model(trial)
        if folder is not None:
            step = int(result.get("epoch", result.get("training_iteration", 0)))
            self.queue_client([trial]).log_model(run_id, str(folder), layout.LOGGED_MODEL_NAME, step)

    def on_trial_error(self, iteration, trials, trial, **info) -> None:
        run_id = self.run_id(trial)
        error = error_text(trial)
        message = str(error).strip().splitlines()[-1] if error else "unknown error"
        client = self.queue_client([trial])
        store.set_tags(
            client,
            run_id,
            {
                layout.STATUS: "FAILED",
                layout.FAILURE_REASON: f"error: {message}"[:4000],
                layout.STOPPED_EARLY: "false",
            },
        )
        store.log_params(client, run_id, layout.constant_params(trial.last_result or {}))
        self.log_trial_files(trial, run_id, checkpoint=False)
        client.set_terminated(run_id, "FAILED")

    def on_trial_recover(self, iteration, trials, trial, **info) -> None:
        """Tune restarts the trial from its last checkpoint (its worker or node was lost)."""
        store.set_tags(self.queue_client([trial]), self.run_id(trial), {layout.RESTARTS: trial.num_failures})

    # -- artifacts (tracking.trial_artifacts) --------------------------------------------------
    def log_trial_files(self, trial, run_id: str, checkpoint: bool, why: str = "all") -> None:
        """The trial's stdout/stderr under logs/ and, if asked, its final checkpoint under checkpoint/."""
        client = self.queue_client([trial])
        staging = Path(trial.remote_experiment_path) / trial_artifacts.STAGING_DIR
        try:
            for path in trial_artifacts.stage_logs(trial, staging):
                client.log_artifact(run_id, str(path), trial_artifacts.LOGS_ARTIFACT)
        except OSError:
            pass  # logs are a convenience: never fail the study over them
        found = trial_artifacts.final_checkpoint(trial) if checkpoint else None
        if found is not None:
            client.log_artifact(run_id, str(found), trial_artifacts.CHECKPOINT_ARTIFACT)
            store.set_tags(client, run_id, {layout.CHECKPOINT: why})

    def arm_of(self, trial, description: TrialDescription) -> str:
        """The group `best` picks one configuration in: mixer x regime."""
        return layout.train_arm(description.params)

    def log_best_checkpoints(self, trials) -> None:
        """`tracking.checkpoints: best`: the final checkpoints of every replicate of the best
        configuration per arm (or of each Pareto configuration), by the validation objectives."""
        if self.checkpoints != "best" or not self.objectives or not trials:
            return
        entries = []
        for trial in trials:
            result = trial.last_result or {}
            planned, epoch = result.get(RESULT_PLANNED_EPOCHS), result.get("epoch")
            if trial.status != "TERMINATED" or result.get(RESULT_FAILURE_REASON):
                continue
            if planned is None or epoch is None or epoch < planned:
                continue  # stopped early or never reported: not a finished configuration
            description = self.describe(trial.config)
            entries.append(
                {
                    "trial": trial,
                    "arm": self.arm_of(trial, description),
                    "config_key": description.config_key,
                    "metrics": result,
                }
            )
        for entry in trial_artifacts.choose_best(entries, self.objectives):
            trial = entry["trial"]
            found = trial_artifacts.final_checkpoint(trial)
            client = self.queue_client([trial])
            # Found, not reopened: a trial an earlier driver finished keeps its run (and end time).
            run_id = self._runs.get(trial.trial_id) or client.queue.find(
                **{layout.PARENT_RUN_ID: self.parent_run_id, layout.TRIAL_ID: trial.trial_id}
            )
            if found is not None and run_id is not None:
                client.log_artifact(run_id, str(found), trial_artifacts.CHECKPOINT_ARTIFACT)
                store.set_tags(client, run_id, {layout.CHECKPOINT: "best"})

    def on_experiment_end(self, trials, **info) -> None:
        self.log_best_checkpoints(trials)
        # Trials that never finished (e.g. the run was interrupted) stay RUNNING; `resume` ends them.
        # The driver (tune.run) waits for the queue to be sent before it reads the summary.
        client = self.queue_client(trials) if trials else store.client_for(self.tracking_uri)
        client.set_terminated(self.parent_run_id, "FINISHED")
