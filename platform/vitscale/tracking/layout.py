"""How a study lands in MLflow: the contract between the writers (tune, bench) and readers (analyze).

One experiment per study (`tracking.experiment`, default: the study name). In it:
- one parent run per study execution: tags ROLE=study, STUDY=<name>, KIND=train|benchmark,
  SPEC_HASH, GIT_COMMIT, GIT_DIRTY, MLflow's SOURCE_* tags, versions; the study description
  as its note (NOTE); artifacts `spec.yaml` (the resolved spec), `requirements.txt` (pip freeze
  of the driver) and `git.diff` when dirty (see tracking.provenance); PLANNED_TRIALS;
  JOBS (the Ray job ids that ran or resumed it, when submitted: `study status` reads progress).
- one child run per trial, nested under the parent (tag mlflow.parentRunId): tags ROLE=trial,
  STUDY, KIND, TRIAL_ID (the Ray trial id), STATUS, FAILURE_REASON, the parent's GIT_*/SOURCE_* tags,
  STOPPED_EARLY, NODE_ID, CONFIG_KEY. DID_NOT_TRAIN ("true" when a finished trial's final
  validation top-1 stayed within 2 points of chance). RESTARTS (set once a trial was restarted
  after a lost worker or node); DISCARDED_CHECKPOINT (the damaged checkpoint a restored trial
  could not read, and why: it then trained again from epoch 0); QUEUE_ID on every run created through the write queue
  (tracking.queue); CHECKPOINT ("best" | "all") on a run that holds its checkpoint as an artifact.
  Name (`run_name`): what differs between the study's runs, first, then the seed, joined by " · ":
  a grid point's values (`ssog · ode · w64 · s1`; NAME_SHORT keys as w64, r32, K4, strings bare,
  others leaf=value), a sampled point's variant names and its Optuna trial number
  (`ssog · #7 · s0`); a comparison's runs begin with their phase and arm
  (`tune · ssog · ode · #7 · s0`, `final · ssog · ode · s100`). No Ray id: that is TRIAL_ID.
  Params: the trial as it ran (`study.run_trial`, `study.run_params`), dotted keys (`model.mixer`,
  `model.width`, `data.resolution`, `train.seed`, ...), every value resolved (train.threads as run,
  the recipe filled from the data set, model.layer_scale and model.pos_embed as the mixer and
  regime chose them) and only the active mixer's and regime's settings (an SSoG run has no
  `model.attention.*`): `vitscale train --from-run RUN_ID` rebuilds the trial from them.
  CONSTANT_METRICS (`params`, `flops_per_image`, `world_size`) are params too, logged when the trial ends.
  Metrics: every other epoch metric with step=epoch (not `epoch` itself, nor `did_not_train`: see
  UNLOGGED_METRICS), and the final values (MLflow's latest value per key). A trial that ran all
  its planned epochs also has `test_top1`, `test_top5`, `test_loss` (evaluated once, at the end;
  never used to select). Readers take metrics through `run_values`, which also reads the
  constants of runs that logged them as metrics (before they moved). CURVE_METRICS are the
  per-epoch histories a learning curve is drawn from: `images_seen` (x), `val_top1` and
  CURVE_TEST_TOP1 (test top-1 at each evaluated epoch: only final-phase runs with
  `train.test_curve` on log it; it is drawn, never selected on).
- benchmark studies: one child run per configuration; params `bench.*`
  (mixer, regime, resolution, attention_backend, batch_size, mode, dtype, device, compile, width,
  depth, heads, patch_size, num_gaussians); metrics BENCH_METRICS; STATUS is FINISHED or FAILED
  with FAILURE_REASON `out_of_memory` for an out-of-memory configuration. `bench.dtype`,
  `bench.batch_size` and `bench.compile` are the run's own value where the sweep lists several
  (each a configuration of its own, like a grid point's value; the list is in the parent's
  spec.yaml), and its name then carries them (`ssog · ode · r512 · bfloat16 · b512 · s0`).
- `vitscale train`: one run (in experiment `vitscale-train` unless `--experiment`), tags
  ROLE=train, the GIT_*/SOURCE_* tags, DID_NOT_TRAIN; params and metrics as a trial's; artifacts
  `checkpoint/` (with --checkpoint-dir), predictions, `requirements.txt` and `git.diff` when dirty.
  A rerun (`--from-run RUN_ID`) lands in its source's experiment, named after it (`rerun_name`:
  `ssog · ode · s3 · rerun`), tagged FROM_RUN=RUN_ID.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# Keys of a trial's result that are not metrics (strings, bookkeeping of Tune and vitscale): the
# trainable reports them, the driver's callback reads them. Here, not in tune_callback, so a trial
# worker imports them without MLflow (2 s of CPU per worker start, issue 30).
RESULT_FAILURE_REASON = "failure_reason"
RESULT_FAILURE_MESSAGE = "failure_message"
RESULT_NODE_ID = "node_id"
RESULT_PLANNED_EPOCHS = "planned_epochs"
RESULT_DID_NOT_TRAIN = "did_not_train"  # 1.0 in the final epoch's result of a trial stuck at chance
RESULT_DISCARDED_CHECKPOINT = "discarded_checkpoint"  # "<checkpoint>: <why>": restarted from epoch 0
RESULT_WORKER_GROUP = "worker_group"  # a Ray Train trial's placement group (hex id): tune.distributed_trial
RESULT_NODES_SPANNED = "nodes_spanned"  # nodes a simulated trial's workers sit on: tune.cluster_scale
# JSON list of {epoch, values, cloned_from?}: in the last result of a trial whose values changed
# while it trained (a PBT/PB2 member, a replayed train.schedule; train.hyper_schedule)
RESULT_SCHEDULE = "schedule"
SCHEDULE_ARTIFACT = "schedule.json"  # that schedule on the trial's child run
EXPLOITS = "vitscale.exploits"  # tag: how often that trial continued from another member's checkpoint

# Where runs go unless `--tracking-uri`, the environment or a study's `tracking.uri` says otherwise
# (`tracking.store.resolve_tracking_uri` applies that order).
DEFAULT_TRACKING_URI = "sqlite:///mlflow.db"
TRACKING_URI_ENV = "VITSCALE_TRACKING_URI"

TAG_PREFIX = "vitscale."
ROLE = "vitscale.role"  # "study" | "trial" | "train" (ROLE_TRAIN)
ROLE_TRAIN = "train"  # a run of `vitscale train`: no study, no parent
# `vitscale train`'s experiment unless --experiment (a --from-run rerun: its source's)
TRAIN_EXPERIMENT = "vitscale-train"
FROM_RUN = "vitscale.from_run"  # `vitscale train --from-run`: the id of the run it reran
STUDY = "vitscale.study"
KIND = "vitscale.kind"  # the study kind (vitscale.kinds): "train" | "benchmark" | "comparison"
SPEC_HASH = "vitscale.spec_hash"
GIT_COMMIT = "vitscale.git_commit"
TRIAL_ID = "vitscale.trial_id"
STATUS = "vitscale.status"  # FINISHED | FAILED | KILLED | RUNNING
FAILURE_REASON = "vitscale.failure_reason"  # diverged | solver_error | out_of_memory | error: ... (errors.py)
STOPPED_EARLY = "vitscale.stopped_early"  # "true" | "false" (ASHA stopped it)
NODE_ID = "vitscale.node_id"
DID_NOT_TRAIN = "vitscale.did_not_train"  # "true" | "false": finished at chance level (see train.metrics)
PHASE = "vitscale.phase"  # comparison studies: "tune" | "confirm" | "final"
ARM = "vitscale.arm"  # comparison studies: the arm key, e.g. "model.mixer=ssog,model.regime=ode"
FIDELITY = "vitscale.fidelity"  # comparison tuning runs: JSON of search.fidelity (their cheaper trial)
REFERENCE = "vitscale.reference"  # comparison parent run: JSON of the reference arm's values
TUNED_FROM = "vitscale.tuned_from"  # comparison parent run: JSON {study, run_id, tuning_seeds, fidelity}
# comparison parent run: JSON {arm key: {rho, n, confirmed, changed}}, one entry per arm whose
# low-fidelity top points were re-run at full fidelity (phase "confirm"; tune.confirmation)
RANK_TRANSFER = "vitscale.rank_transfer"
CONFIG_KEY = "vitscale.config_key"  # hash of the trial config without the seed: groups replicates
RESTARTS = "vitscale.restarts"  # times the trial was restarted from its checkpoint (worker/node lost)
DISCARDED_CHECKPOINT = "vitscale.discarded_checkpoint"  # "<checkpoint>: <why>": damaged, trial restarted
QUEUE_ID = "vitscale.queue_id"  # the placeholder id a run had in the driver's write queue (tracking.queue)
CHECKPOINT = "vitscale.checkpoint"  # "best" | "all": why the run holds checkpoint/checkpoint.pt
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

# MLflow Models (tracking.logged_model): every trial that ran all its planned epochs logs its final
# model as a LoggedModel of this name, linked to its child run (`runs:/<run id>/model`).
LOGGED_MODEL_NAME = "model"
# What the trial leaves for it beside its final checkpoint (train.served_model writes, the driver
# reads; here so a trial worker names them without importing MLflow): the model behind evaluation's
# preprocessing, and one test image as the input example.
PREDICTIONS_ARTIFACT = "predictions"  # artifact folder of a trial's run: per-image predictions (parquet)
SERVED_DIR = "served"
SERVED_MODEL_FILE = "model.pt"
INPUT_EXAMPLE_FILE = "input_example.npy"
# The Model Registry (tracking.model_registry, `--register`): the best model per arm of a study is a
# version of the registered model `registered_model_name(study, arm)`, the newest under this alias
# (`models:/quickstart-ssog-ode@best`); the version's tags repeat STUDY, ARM and the objective.
REGISTERED_ALIAS = "best"
# Experiment tag of the runs-table view of a study (tracking.runs_view): MLflow 3.15+ keeps a saved
# view as the experiment tag `mlflow.sharedViewState.<id>` (id: `saved_view_id`); the UI lists it
# under Views by name (`saved_view_name`) and opens it at `saved_view_url`.
SAVED_VIEW_PREFIX = "mlflow.sharedViewState."

# A comparison's parent run: its record (each arm's choice, its confirmation at full fidelity, the
# tuned values at a range's edge), as the execution folder holds it (tune.comparison writes both).
COMPARISON_ARTIFACT = "comparison.json"

STATUSES = ("FINISHED", "FAILED", "KILLED", "RUNNING")

# What a trial reports every epoch although it never changes over the trial: logged once, as MLflow
# params, when the trial ends (an ODE's flops_per_image follows its final validation NFE), so MLflow's
# chart grid and parallel coordinates lead with what training changes. Runs logged before that hold
# them as metrics; `run_values` reads either.
# world_size: the processes that trained it (resources.workers; 1 for a one-process trial).
CONSTANT_METRICS = ("params", "flops_per_image", "world_size")
# Reported to Tune but not logged as MLflow metrics: a metric's step is the epoch, did_not_train
# is the DID_NOT_TRAIN tag, and the planned epochs (what train.train_flops buys) steer the status.
UNLOGGED_METRICS = ("epoch", "did_not_train", RESULT_PLANNED_EPOCHS)
# Logged with every epoch: the last step of its history is the last epoch MLflow holds.
STEP_METRIC = "val_loss"
# Test top-1 at each evaluated epoch (final-phase runs with `train.test_curve`): a learning curve's
# test line, reported only. Runs logged before it have none: their curves show validation alone.
CURVE_TEST_TOP1 = "curve_test_top1"
# The per-epoch histories (step = epoch) a learning curve reads: images seen, validation, test.
CURVE_METRICS = ("images_seen", "val_top1", CURVE_TEST_TOP1)

# Run names: the separator, and the short forms of the keys they show most (the rest: leaf=value).
NAME_SEP = " · "
NAME_SHORT = {
    "model.width": "w",
    "model.depth": "d",
    "model.heads": "h",
    "model.patch_size": "p",
    "model.ssog.num_gaussians": "K",
    "data.resolution": "r",
    "bench.batch_size": "b",
    "data.num_train": "n",
    "train.epochs": "e",
}

# Per-arm metrics of a comparison's parent run (`arm/<arm>/<name>`, tracking.parent_summary): Spearman's
# ρ between an arm's low- and full-fidelity validation scores of its confirmed points, and their n.
RANK_TRANSFER_RHO = "rank_transfer_rho"
RANK_TRANSFER_N = "rank_transfer_n"

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


ARM_FIELDS = ("model.mixer", "model.regime")  # a train study's arm: what ASHA rungs and `best` group by


def train_arm(params: Mapping[str, Any]) -> str:
    """A train study's arm of a trial's flat params: the ARM tag of its mixer and regime
    ('model.mixer=ssog,model.regime=ode')."""
    return arm_key({field: params.get(field) for field in ARM_FIELDS})


def _arm_value(value: Any) -> str:
    return "+".join(map(str, value)) if isinstance(value, list | tuple) else str(value)


def registered_model_name(study: str, arm: str) -> str:
    """A study's arm in the Model Registry: 'quickstart-ssog-ode' for the ARM tag
    'model.mixer=ssog,model.regime=ode' (MLflow refuses '/' and ':' in a name; spaces and other
    marks would need quoting in a models:/ URI, so each becomes '_')."""
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", f"{study}-{arm_display(arm, '-')}")


def saved_view_id(study: str) -> str:
    """The id of a study's saved runs view: 'vitscale-quickstart'."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", f"vitscale-{study}")


def saved_view_name(study: str) -> str:
    """What the UI's Views menu calls it: 'quickstart: key metrics'."""
    return f"{study}: key metrics"


def saved_view_url(experiment_id: str, study: str) -> str:
    """The MLflow UI page (after the server's address) of the study's runs in its saved view."""
    return f"#/experiments/{experiment_id}/runs?viewStateShareKey={saved_view_id(study)}"


def parse_arm(tag: str) -> dict[str, str]:
    """An ARM tag -> its values: 'model.mixer=ssog,model.regime=ode' -> {'model.mixer': 'ssog', ...}."""
    pairs = [p.split("=", 1) for p in tag.split(",") if "=" in p]
    return {k.strip(): v.strip() for k, v in pairs}


def arm_display(tag: str, sep: str = " · ") -> str:
    """An ARM tag for people: 'model.mixer=ssog,model.regime=ode' -> 'ssog · ode' (CSVs keep the tag)."""
    values = parse_arm(tag)
    return sep.join(map(_display_value, values.values())) if values else tag


def _display_value(value: str) -> str:
    """'12800000000000.0' -> '1.28e+13' (a FLOP budget), '0.002' and '64' as they are."""
    try:
        number = float(value)
    except ValueError:
        return value
    return f"{number:g}" if "." in value or "e" in value.lower() else value


def run_name(
    values: Mapping[str, Any],
    seed: int | None = None,
    *,
    phase: str | None = None,
    sample: int | None = None,
) -> str:
    """A child run's name, what differs first: `run_name({"model.mixer": "ssog", "model.regime":
    "ode", "model.width": 64}, 1)` -> 'ssog · ode · w64 · s1'; with phase="tune", sample=7 and no
    values -> 'tune · #7 · s1'. The only place names are spelled (trials, comparisons, benchmarks)."""
    parts = [phase] if phase else []
    parts += [name_part(key, value) for key, value in values.items()]
    if sample is not None:
        parts.append(f"#{sample}")
    if seed is not None:
        parts.append(f"s{seed}")
    return NAME_SEP.join(parts) or "base"


def rerun_name(source: str) -> str:
    """A `vitscale train --from-run` run's name: its source's, marked (`ssog · ode · s3 · rerun`)."""
    return f"{source}{NAME_SEP}rerun" if source else "rerun"


BOOLEAN_WORDS = ("True", "False")


def name_part(key: str, value: Any) -> str:
    """One value in a run name: 'w64' (NAME_SHORT), 'ssog' (a string), 'lr=0.003' and
    'qk_norm=False' (anything else, flags read back from MLflow's string params included)."""
    if isinstance(value, list | tuple):
        text = "+".join(map(str, value))
    else:
        text = f"{value:g}" if isinstance(value, float) else str(value)
    if key in NAME_SHORT:
        return f"{NAME_SHORT[key]}{text}"
    if isinstance(value, str) and text not in BOOLEAN_WORDS:  # 'False' read back from a param is a flag
        return text
    return f"{key.rsplit('.', 1)[-1]}={text}"


def constant_params(result: Mapping[str, Any]) -> dict[str, Any]:
    """The CONSTANT_METRICS of a trial's (last) result, as the params they are logged as."""
    return {k: _plain(result[k]) for k in CONSTANT_METRICS if isinstance(result.get(k), int | float)}


def epoch_metrics(metrics: Mapping[str, Any]) -> dict[str, Any]:
    """What of one epoch's metrics MLflow logs as metrics: not the constants (params), the epoch
    (the step) nor did_not_train (a tag)."""
    return {k: v for k, v in metrics.items() if k not in CONSTANT_METRICS and k not in UNLOGGED_METRICS}


def _plain(value: float) -> int | float:
    """12345.0 -> 12345 (a count reads as one), other values as they are."""
    return int(value) if float(value).is_integer() else float(value)


def run_values(metrics: Mapping[str, float], params: Mapping[str, str]) -> dict[str, float]:
    """A child run's final metrics with its CONSTANT_METRICS, read from its params (or, for runs
    logged before they moved, from its metrics): what summaries and the analysis select on."""
    out = dict(metrics)
    for key in CONSTANT_METRICS:
        if key not in out and key in params:
            try:
                out[key] = float(params[key])
            except ValueError:
                continue  # not a number: a foreign param of that name
    return out
