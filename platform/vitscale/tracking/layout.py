"""How a study lands in MLflow: the contract between the writers (tune, bench) and readers (analyze).

One experiment per study (`tracking.experiment`, default: the study name). In it:
- one parent run per study execution: tags ROLE=study, STUDY=<name>, KIND=train|benchmark,
  SPEC_HASH, GIT_COMMIT, GIT_DIRTY, MLflow's SOURCE_* tags, versions; the study description
  as its note (NOTE); artifacts `spec.yaml` (the resolved spec), `requirements.txt` (pip freeze
  of the driver) and `git.diff` when dirty (see tracking.provenance); PLANNED_TRIALS;
  JOBS (the Ray job ids that ran or resumed it, when submitted: `study status` reads progress).
- one child run per trial, nested under the parent (tag mlflow.parentRunId): tags ROLE=trial,
  STUDY, KIND, TRIAL_ID, STATUS, FAILURE_REASON, the parent's GIT_*/SOURCE_* tags, STOPPED_EARLY, NODE_ID, CONFIG_KEY.
  DID_NOT_TRAIN ("true" when a finished trial's final validation top-1 stayed within 2 points
  of chance). RESTARTS (set once a trial was restarted after a lost worker or node); QUEUE_ID on
  every run created through the write queue (tracking.queue). Params: the flattened resolved trial config with dotted keys (`model.mixer`, `model.width`,
  `data.resolution`, `train.seed`, ...). Metrics: every epoch metric with step=epoch, and the
  final values (MLflow's latest value per key). A trial that ran all its planned epochs also
  has `test_top1`, `test_top5`, `test_loss` (evaluated once, at the end; never used to select).
- benchmark studies: one child run per configuration; params `bench.*`
  (mixer, regime, resolution, attention_backend, batch_size, mode, dtype, device, compile, width,
  depth, heads, patch_size, num_gaussians); metrics BENCH_METRICS; STATUS is FINISHED or FAILED
  with FAILURE_REASON `out_of_memory` (older runs: `oom`) for an out-of-memory configuration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Where runs go unless `--tracking-uri`, the environment or a study's `tracking.uri` says otherwise
# (`tracking.store.resolve_tracking_uri` applies that order).
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
TRACKING_URI_ENV = "VITSCALE_TRACKING_URI"

TAG_PREFIX = "vitscale."
ROLE = "vitscale.role"  # "study" | "trial"
STUDY = "vitscale.study"
KIND = "vitscale.kind"  # "train" | "benchmark"
SPEC_HASH = "vitscale.spec_hash"
GIT_COMMIT = "vitscale.git_commit"
TRIAL_ID = "vitscale.trial_id"
STATUS = "vitscale.status"  # FINISHED | FAILED | KILLED | RUNNING
FAILURE_REASON = "vitscale.failure_reason"  # diverged | solver_error | out_of_memory (vitscale.errors; older bench runs: oom) | error: ...
STOPPED_EARLY = "vitscale.stopped_early"  # "true" | "false" (ASHA stopped it)
NODE_ID = "vitscale.node_id"
DID_NOT_TRAIN = "vitscale.did_not_train"  # "true" | "false": finished at chance level (see train.metrics)
PHASE = "vitscale.phase"  # comparison studies: "tune" | "final"
ARM = "vitscale.arm"  # comparison studies: the arm key, e.g. "model.mixer=ssog,model.regime=ode"
FIDELITY = "vitscale.fidelity"  # comparison tuning runs: JSON of search.fidelity (their cheaper trial)
REFERENCE = "vitscale.reference"  # comparison parent run: JSON of the reference arm's values
TUNED_FROM = "vitscale.tuned_from"  # comparison parent run: JSON {study, run_id, tuning_seeds, fidelity}
CONFIG_KEY = "vitscale.config_key"  # hash of the trial config without the seed: groups replicates
RESTARTS = "vitscale.restarts"  # times the trial was restarted from its checkpoint (worker/node lost)
QUEUE_ID = "vitscale.queue_id"  # the placeholder id a run had in the driver's write queue (tracking.queue)
PLANNED_TRIALS = "vitscale.planned_trials"  # parent run: trials the study plans
JOBS = "vitscale.jobs"  # parent run: space-separated Ray job submission ids that ran/resumed it
PARENT_RUN_ID = "mlflow.parentRunId"
GIT_DIRTY = "vitscale.git.dirty"  # "true" | "false" | "unknown": tracked files differed from the commit
# MLflow's own tags (the UI's Source column, the run page's note).
SOURCE_COMMIT = "mlflow.source.git.commit"
SOURCE_NAME = "mlflow.source.name"
SOURCE_TYPE = "mlflow.source.type"
NOTE = "mlflow.note.content"
# Experiment tag: MLflow 3 opens an experiment on its GenAI overview unless it is marked as model
# training; every experiment vitscale creates carries it, so the UI lands on the runs table.
EXPERIMENT_KIND = "mlflow.experimentKind"
EXPERIMENT_KIND_TRAINING = "custom_model_development"

STATUSES = ("FINISHED", "FAILED", "KILLED", "RUNNING")

BENCH_METRICS = (
    "images_per_second",
    "latency_ms",
    "peak_memory_mb",
    "flops_per_image",
    "nfe",
    "tokens",
    "params",
)


def arm_key(arm: Mapping[str, Any]) -> str:
    """An arm's values -> its ARM tag: 'model.mixer=ssog,model.regime=ode' (keys in `arms:` order);
    a list value joins with '+' (data.train_resolutions=28+44+56), so the tag still splits on ','."""
    return ",".join(f"{k}={_arm_value(v)}" for k, v in arm.items())


def _arm_value(value: Any) -> str:
    return "+".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def parse_arm(tag: str) -> dict[str, str]:
    """An ARM tag -> its values: 'model.mixer=ssog,model.regime=ode' -> {'model.mixer': 'ssog', ...}."""
    pairs = [p.split("=", 1) for p in tag.split(",") if "=" in p]
    return {k.strip(): v.strip() for k, v in pairs}


def arm_display(tag: str, sep: str = " · ") -> str:
    """An ARM tag for people: 'model.mixer=ssog,model.regime=ode' -> 'ssog · ode' (CSVs keep the tag)."""
    values = parse_arm(tag)
    return sep.join(values.values()) if values else tag
