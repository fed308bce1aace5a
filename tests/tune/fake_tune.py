"""A fake Ray Tune for the driver's orchestration (phases, resume planning, summaries): as Ray
Tune's own tests fake a ResultGrid, each phase's trials "train" in microseconds with a score that a
function of the trial gives, through the phase's real MLflow callback into a real SQLite store,
and come back as a fake ResultGrid of Results (config, metrics, error). The driver around it is the
real one (`tune.run.run_study` / `resume_study`, `tune.comparison`); Ray itself is never started.

`FakeTune.install(monkeypatch)` replaces what would reach Ray: the Tuner (built, restored, fitted),
`ray.init` and the cluster checks that ask the nodes. Tune's experiment state is this object's: a
phase restored after a `DriverKilled` continues with its unfinished trials, under the same trial
ids, as `Tuner.restore(resume_unfinished=True)` does.
"""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ray import tune

from vitscale.study import grid_points, resolve_trial, suggest_point

# (phase folder, the trial as it would train: a TrialConfig) -> val_top1; None: it diverges
Score = Callable[[str, Any], "float | None"]


@dataclass
class FakeResult:
    """ray.tune.Result as the driver reads it."""

    config: dict
    metrics: dict
    error: BaseException | None = None


class FakeResultGrid:
    """ray.tune.ResultGrid: a sequence of Results, one per trial."""

    def __init__(self, results: list[FakeResult]) -> None:
        self._results = list(results)

    def __iter__(self):
        return iter(self._results)

    def __len__(self) -> int:
        return len(self._results)

    def __getitem__(self, i: int) -> FakeResult:
        return self._results[i]


@dataclass
class FakeTrial:
    """A ray.tune Trial as the MLflow callback reads it; `path` names no folder: no logs or
    checkpoints to log."""

    trial_id: str
    config: dict
    remote_experiment_path: str
    path: str
    last_result: dict = field(default_factory=dict)
    status: str = "PENDING"
    num_failures: int = 0
    storage: Any = None

    def get_error(self):
        return None


class DriverKilled(Exception):
    """The driver dies here, as under SIGKILL: the trial just started stays RUNNING in MLflow."""


def trial_configs(spec, search, storage: str = "", study_name: str = "") -> list[dict]:
    """The phase's trial configs, as its Tune searcher would hand them out: a given search's grid
    (`{"point": grid_search, "seed": grid_search}`), the spec's grid x seeds, or `num_samples`
    random draws of its space (Optuna's RandomSampler, `search.sampler_seed`) x seeds, numbered,
    kept as the real searcher keeps them: in the execution's Optuna storage under the arm's name
    (a resume checks it is still there)."""
    if search is not None:
        _, space, _ = search
        grids = {
            k: v["grid_search"] if isinstance(v, dict) and "grid_search" in v else [v]
            for k, v in space.items()
        }
        return [dict(zip(grids, values, strict=True)) for values in itertools.product(*grids.values())]
    seeds = list(spec.search.seeds)
    if spec.search.algorithm == "grid":
        return [{"point": p, "seed": s} for p in grid_points(spec) for s in seeds]
    import optuna

    study = optuna.create_study(
        sampler=optuna.samplers.RandomSampler(seed=spec.search.sampler_seed),
        storage=storage or None,
        study_name=study_name or None,
        load_if_exists=True,
    )
    configs = []
    for _ in range(spec.search.num_samples):
        trial = study.ask()
        point = suggest_point(trial, spec)
        configs += [{"point": point, "seed": s, "sample": trial.number} for s in seeds]
    return configs


class FakeTuner:
    """One phase's experiment: its trials and the callback that records them."""

    def __init__(self, fake: FakeTune, directory: Path, spec, configs: list[dict], callback) -> None:
        self.fake, self.directory, self.spec, self.callback = fake, directory, spec, callback
        self.epochs = spec.trial.resolved().train.epochs
        self.trials = [
            FakeTrial(f"{directory.name}_{i:05d}", c, str(directory), str(directory / "no-trial-folder"))
            for i, c in enumerate(configs)
        ]

    def fit(self) -> FakeResultGrid:
        self.fake.fits.append(self.directory.name)
        for trial in self.trials:
            if trial.status == "TERMINATED":
                continue  # finished before the driver died: not run again
            self.callback.on_trial_start(0, self.trials, trial)
            if self.fake.kill_due(self.directory.name):
                raise DriverKilled(f"{self.directory.name}: {trial.trial_id} started")
            result = self.result(trial)
            self.callback.on_trial_result(0, self.trials, trial, result)
            trial.last_result, trial.status = result, "TERMINATED"
            self.callback.on_trial_complete(0, self.trials, trial)
            self.fake.done[self.directory.name] = self.fake.done.get(self.directory.name, 0) + 1
        self.callback.on_experiment_end(self.trials)
        return FakeResultGrid(FakeResult(t.config, dict(t.last_result)) for t in self.trials)

    def result(self, trial: FakeTrial) -> dict:
        config = trial.config
        score = self.fake.score(
            self.directory.name, resolve_trial(self.spec, config["point"], config["seed"])
        )
        failed = score is None
        return {
            "val_top1": float("nan") if failed else score,
            "val_loss": float("nan") if failed else 1.0 - score,
            "test_top1": float("nan") if failed else score - 0.01,
            "epoch": self.epochs,
            "planned_epochs": self.epochs,
            "failure_reason": "diverged" if failed else "",
            "trial_id": trial.trial_id,
        }


class FakeTune:
    def __init__(self, score: Score, kill_at: tuple[str, int] | None = None) -> None:
        self.score = score
        self.kill_at = kill_at  # (phase folder, trials completed in it): the driver dies there, once
        self.experiments: dict[str, FakeTuner] = {}  # phase folder path -> its experiment
        self.fits: list[str] = []  # phase folders in the order their fit() ran
        self.done: dict[str, int] = {}  # phase folder -> trials completed

    def kill_due(self, phase: str) -> bool:
        if self.kill_at is not None and self.kill_at == (phase, self.done.get(phase, 0)):
            self.kill_at = None
            return True
        return False

    # tune.comparison.build_tuner
    def build_tuner(self, execution, verbose=0, *, callback=None, search=None, progress=None, optuna_name=""):
        directory = Path(execution.directory)
        configs = trial_configs(execution.spec, search, execution.optuna_storage, optuna_name)
        tuner = FakeTuner(self, directory, execution.spec, configs, callback)
        self.experiments[str(directory)] = tuner
        return tuner

    # tune.Tuner.can_restore / restore
    def can_restore(self, path) -> bool:
        return str(path) in self.experiments

    def restore(self, path, trainable=None, **options) -> FakeTuner:
        tuner = self.experiments[str(path)]
        tuner.callback = pickle.loads(pickle.dumps(tuner.callback))  # as Tune unpickles it: a new driver's
        return tuner

    def install(self, monkeypatch) -> FakeTune:
        from vitscale.tune import cluster, comparison, run, storage

        fake_tune = SimpleNamespace(
            Tuner=SimpleNamespace(can_restore=self.can_restore, restore=self.restore),
            grid_search=tune.grid_search,
        )
        monkeypatch.setattr(comparison, "tune", fake_tune)
        monkeypatch.setattr(comparison, "build_tuner", self.build_tuner)
        monkeypatch.setattr(cluster, "connect", lambda *args, **kwargs: None)
        monkeypatch.setattr(cluster, "preflight", lambda *args, **kwargs: None)
        monkeypatch.setattr(run, "_check_cpu_share", lambda *args, **kwargs: None)
        monkeypatch.setattr(storage, "check_shared", lambda root: None)
        return self
