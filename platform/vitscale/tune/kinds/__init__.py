"""How tune runs each study kind: `TUNE_KINDS`, kind name -> `TuneKind`.

The trial function, how a trial is described in MLflow, the search, whether workers are reused,
how a study runs and resumes (one Tune experiment, or a comparison's phases), how its summary and
`study status` rank configurations and how many threads a trial takes are the kind's entry here,
looked up by the kind's name; nothing in tune switches on the kind. The modules of this package
register the shipped kinds' entries (`train`, `benchmark`, `comparison`), imported on the table's
first lookup (they import Ray; this module does not). A plugin kind registers its own with
`TUNE_KINDS.register(name, TuneKind(...))`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vitscale.kinds.table import KindTable


@dataclass(frozen=True)
class TuneKind:
    """One kind's part of tune. Callables take the StudySpec (`spec`) and, for runs, the
    `tune.run.StudyExecution`."""

    run: Callable[[Any, int], Any]  # (execution, verbose) -> StudySummary: a fresh execution
    resume: Callable[[Any, int], Any]  # (execution, verbose) -> StudySummary: continue its folder
    trial: Callable[..., Any]  # the Tune trainable: (config, spec=spec) -> None, reports to Tune
    describe: Callable[[dict, Any], Any]  # (trial config, spec) -> TrialDescription of its child run
    # (spec, directory, optuna storage URL, parent run id, Optuna study name) -> (searcher, param space, samples)
    search: Callable[[Any, Any, str, str, str], tuple]
    reported_keys: Callable[[Any], list[str]]  # the point's keys Ray's status table shows
    reuse_workers: bool  # one worker runs trial after trial; False: a fresh process each (timings, memory)
    best_of: Callable[[Any], tuple[str, str] | None]  # (metric, mode) progress and status rank by; None: none
    best: Callable[
        [list, list[tuple[str, str]], Any], dict
    ]  # (trial rows, objectives, spec) -> best per resolution
    threads: Callable[[Any], tuple[str, int]]  # (the key that sets them, the most threads a trial runs)
    status_phase: Callable[[Any, list], str]  # (spec, child runs) -> the phase `study status` shows ("" none)
    uses_optuna: Callable[[Any], bool]  # whether the execution has an Optuna study of its own
    optuna_per_arm: bool = False  # its arms each tune in an Optuna study (one storage for them all)
    # How its trials run on Ray: a `tune.execution_modes.ExecutionMode` of its own (the simulated
    # trials of `tune.cluster_scale` hold a worker group's bundles themselves); None: by
    # `resources.workers`, one process or Ray Train (`tune.execution_modes.EXECUTION_MODES`).
    execution: Any = None


TUNE_KINDS: KindTable[TuneKind] = KindTable(
    "tune runner (vitscale.tune.kinds.TuneKind)",
    "vitscale.tune.kinds.TUNE_KINDS.register(name, TuneKind(...))",
    builtin=tuple(f"vitscale.tune.kinds.{name}" for name in ("train", "benchmark", "comparison")),
)
