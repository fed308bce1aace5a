"""`--register`: each arm's best model of a study, as a version in the MLflow Model Registry.

Which model: the study's finished trials that ran all their epochs, trained (not DID_NOT_TRAIN)
and logged a model (tracking.logged_model), grouped by arm — mixer x regime for a train study, the
ARM tag of the final runs for a comparison (their configuration is the arm's tuned choice). The
best configuration per arm by its seed mean of the study's first objective (`choose_best`, as
`tracking.checkpoints: best` picks it), then its replicate with the best value: validation
chooses, test never does. Every execution of the study counts (a resumed trial's newest run).

Where: the registered model `layout.registered_model_name(study, arm)` (`quickstart-ssog-ode`);
a new version when the chosen model changed (its source `models:/<model id>`, tags STUDY, ARM and
the objective's value), and the alias `best` moved to it, so `models:/quickstart-ssog-ode@best`
is always the arm's current best. Registering again without a change adds nothing; an arm whose
finished runs all stayed at chance (or logged no model) is named, not registered.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from vitscale.errors import UserError
from vitscale.tracking import layout, store
from vitscale.tracking.parent_summary import PARENT_RUNS
from vitscale.tracking.trial_artifacts import choose_best

KEY = "--register"


@dataclass(frozen=True)
class Registration:
    """One arm's registered model version."""

    name: str
    version: str
    arm: str
    run_id: str
    model_id: str
    metric: str
    value: float
    new: bool  # False: the alias already named this model

    def line(self) -> str:
        state = "registered" if self.new else "already registered"
        return (
            f"{state}: models:/{self.name}@{layout.REGISTERED_ALIAS} = version {self.version} "
            f"({layout.arm_display(self.arm)}: run {self.run_id}, {self.metric} {self.value:.4f})"
        )


def _objective(parent) -> tuple[str, str]:
    """(metric, mode) of the study's first objective, from its parent run's `objectives` param."""
    first = parent.data.params.get("objectives", "val_top1:max").split(",")[0]
    metric, _, mode = first.partition(":")
    return metric, mode or "max"


def _model_id(run) -> str | None:
    """The LoggedModel the run produced (tracking.logged_model), newest first."""
    outputs = getattr(run, "outputs", None)
    models = list(getattr(outputs, "model_outputs", None) or [])
    return models[-1].model_id if models else None


def _entries(runs, phased: bool, metric: str) -> tuple[list[dict], set[str]]:
    """`choose_best`'s entries: complete runs with a model and a finite objective, by arm; and
    every arm that has a complete run (registered or not)."""
    newest: dict[str, object] = {}
    for run in sorted(runs, key=lambda r: r.info.start_time or 0):
        newest[run.data.tags.get(layout.TRIAL_ID) or run.info.run_id] = run  # a resumed trial: newest
    entries, arms = [], set()
    for run in newest.values():
        tags, params = run.data.tags, run.data.params
        if tags.get(layout.STATUS) != "FINISHED" or tags.get(layout.STOPPED_EARLY) == "true":
            continue
        if phased and tags.get(layout.PHASE) != "final":
            continue
        arm = tags.get(layout.ARM, "") if phased else layout.train_arm(params)
        arms.add(arm)
        value = layout.run_values(run.data.metrics, params).get(metric)
        if tags.get(layout.DID_NOT_TRAIN) == "true" or value is None or not math.isfinite(value):
            continue
        model_id = _model_id(run)
        if model_id is None:
            continue
        entries.append(
            {
                "run": run,
                "model_id": model_id,
                "arm": arm,
                "config_key": tags.get(layout.CONFIG_KEY) or run.info.run_id,
                "metrics": {metric: value},
            }
        )
    return entries, arms


@dataclass(frozen=True)
class Registrations:
    """What `--register` did: one registration per arm that has a model, and the arms that have
    finished runs but none that trained and logged a model (nothing registered for them)."""

    done: list[Registration]
    without_model: list[str]

    def lines(self) -> list[str]:
        skipped = [
            f"not registered: {layout.arm_display(arm)} (no finished run that trained and logged a model)"
            for arm in self.without_model
        ]
        return [r.line() for r in self.done] + skipped


def register_best(client, study: str, experiment: str | None = None) -> Registrations:
    """Register each arm's best model of `study` (see the module docstring)."""
    exp = client.get_experiment_by_name(experiment or study)
    parents = (
        store.search_all(
            client,
            [exp.experiment_id],
            f"tags.`{layout.ROLE}` = 'study' and tags.`{layout.STUDY}` = '{study}'",
        )
        if exp
        else []
    )
    if not parents:
        raise UserError(
            f"{KEY}: no runs of study {study!r} in experiment {experiment or study!r}; run it first"
        )
    parent = max(parents, key=lambda r: r.info.start_time or 0)
    kind_name = parent.data.tags.get(layout.KIND, "train")
    kind = PARENT_RUNS[kind_name]
    if not kind.model_runs:
        raise UserError(f"{KEY}: {study} is a {kind_name} study: its runs train no model to register")
    metric, mode = _objective(parent)
    runs = store.search_all(
        client, [exp.experiment_id], f"tags.`{layout.ROLE}` = 'trial' and tags.`{layout.STUDY}` = '{study}'"
    )
    entries, arms = _entries(runs, kind.arm_phases, metric)
    chosen = choose_best(entries, [(metric, mode)])
    sign = 1.0 if mode == "max" else -1.0
    best: dict[str, dict] = {}
    for entry in chosen:  # the best configuration's best replicate, per arm
        held = best.get(entry["arm"])
        score = (sign * entry["metrics"][metric], entry["run"].info.run_id)
        if held is None or score > (sign * held["metrics"][metric], held["run"].info.run_id):
            best[entry["arm"]] = entry
    done = [_register(client, study, arm, best[arm], metric) for arm in sorted(best)]
    return Registrations(done, sorted(arms - set(best)))


def _register(client, study: str, arm: str, entry: dict, metric: str) -> Registration:
    from mlflow.exceptions import MlflowException  # third-party, heavy: only where models register

    name = layout.registered_model_name(study, arm)
    run_id, model_id, value = entry["run"].info.run_id, entry["model_id"], entry["metrics"][metric]
    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name, tags={layout.STUDY: study, layout.ARM: arm})
    try:
        current = client.get_model_version_by_alias(name, layout.REGISTERED_ALIAS)
    except MlflowException:
        current = None
    source = f"models:/{model_id}"
    if current is not None and current.source == source:  # (MLflow's SQL registry keeps no model_id)
        return Registration(name, current.version, arm, run_id, model_id, metric, value, new=False)
    version = client.create_model_version(
        name,
        source=source,
        run_id=run_id,
        model_id=model_id,
        tags={layout.STUDY: study, layout.ARM: arm, metric: f"{value:.6g}"},
    )
    client.set_registered_model_alias(name, layout.REGISTERED_ALIAS, version.version)
    return Registration(name, str(version.version), arm, run_id, model_id, metric, value, new=True)
