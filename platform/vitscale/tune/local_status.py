"""`vitscale study status` on this machine: every study of a storage folder, from a second terminal.

Each `<storage>/<study>/latest` names the study's newest execution. Its line is the progress line
`study run` printed last, read from the execution's progress record (`tune.progress_line`), with
when it was written ("updated … ago"), the ETA less the time since, and how the study stands
(running, finished, killed): the same counts, best and ETA the run shows, in well under a second,
since neither MLflow nor Ray is imported. An execution without a record (begun before records
existed) is read from MLflow instead (`tune.status_from_mlflow`, seconds). A study whose record or
MLflow store cannot be read gets one line saying so; the others are still listed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from vitscale import tune
from vitscale.errors import UserError
from vitscale.tune import execution_files, progress_line
from vitscale.tune.progress_line import Snapshot

DEFAULT_STORAGE = "ray_results"


@dataclass
class LocalStudy:
    """One study's newest execution as `study status` lists it."""

    name: str
    directory: Path
    state: str = ""  # running, finished, failed, killed (the MLflow parent run's status, or the record's)
    snapshot: Snapshot | None = None
    problem: str = ""  # why it could not be read

    def line(self) -> str:
        if self.problem:
            return f"[{self.name}] {self.problem}"
        return f"{self.snapshot.line()} · {self.state.lower()} (execution {self.directory.name})"


def local_studies(storage: str | None = None, name: str | None = None) -> list[LocalStudy]:
    """The studies under `storage` (default ./ray_results), or the one called `name`, by name."""
    root = execution_files.resolve(storage or DEFAULT_STORAGE)
    latest = sorted(root.glob(f"{name or '*'}/{execution_files.LATEST_FILE}"))
    if not latest:
        which = f"no execution of {name}" if name else "no study executions"
        raise UserError(
            f"--storage: {which} under {root}; run one with `vitscale study run FILE`, pass --storage "
            "where it ran, or --address for studies submitted to a cluster"
        )
    return [study_status(path.parent / path.read_text().strip(), path.parent.name, root) for path in latest]


def study_status(directory: Path, name: str, root: Path) -> LocalStudy:
    """One execution folder -> its line: the progress record's, else MLflow's; a problem is
    reported in the line, not raised."""
    record = progress_line.read(directory)
    if record is not None:
        return LocalStudy(name, directory, record.state, record.status_snapshot(time.time()))
    return tune.study_status_from_mlflow(directory, name, root)  # imports MLflow and Ray: seconds


def watch(render, every: float) -> None:
    """Call `render()` every `every` seconds until Ctrl-C, clearing the terminal in between."""
    try:
        while True:
            text = render()
            print("\033[H\033[2J" + text, flush=True)
            time.sleep(every)
    except KeyboardInterrupt:
        pass
