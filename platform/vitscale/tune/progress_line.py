"""What a study's progress line says (`Snapshot`), and its copy in the execution folder.

    [tuned-quickstart] tune arm 2/4 attention · ode  4/4 done · 0 running · 0 failed · best val_top1 0.434 (n=1) lr=0.0022 … · elapsed 32s · ETA 0s — study 8/28 done · 0 failed · ETA 1m20s

A comparison's line counts its phase (one arm's tuning, its confirmation, the final runs) and,
after the dash, the whole study: trials ended in every phase against all it plans, and the ETA of
the rest. Each line the driver prints is also written to `PROGRESS_FILE` (`write`), so `vitscale
study status` shows the very line the run printed last, with "updated … ago", without importing
MLflow or Ray (seconds of start-up) or reading every run back; `mark` records how the study ended
(finished, killed). Light on purpose: no Ray, no MLflow, no pydantic.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from vitscale.tracking.seed_mean import ConfigMean
from vitscale.tune.execution_files import write_atomically

# Not *.json: Tune copies the JSON files at the top of its experiment folder on restore and puts
# them back at every snapshot (see tune.state_digest), which would bring back a stale line.
PROGRESS_FILE = "vitscale-progress.record"
RUNNING = "running"


@dataclass
class StudyCount:
    """The whole study beside one phase's counts: trials ended (done, failed) and planned, ETA."""

    done: int
    failed: int
    planned: int
    eta_s: float | None = None

    def text(self, show_eta: bool = True) -> str:
        text = f"study {self.done}/{self.planned} done · {self.failed} failed"
        if show_eta:
            text += f" · ETA {'–' if self.eta_s is None else duration(self.eta_s)}"
        return text


@dataclass
class Snapshot:
    """Where a study (or one phase of it) stands: what the progress line says."""

    study: str
    phase: str = ""
    done: int = 0
    running: int = 0
    failed: int = 0
    planned: int | None = None
    objective: str = ""
    best: ConfigMean | None = None
    elapsed_s: float | None = None
    updated_s: float | None = None  # `study status`: seconds since the study last changed
    eta_s: float | None = None
    show_eta: bool = True  # a study that is not running has no ETA
    whole: StudyCount | None = None  # a comparison: the whole study, beside its phase

    def line(self) -> str:
        head = f"[{self.study}] " + (f"{self.phase}  " if self.phase else "")
        planned = "?" if self.planned is None else str(self.planned)
        parts = [f"{self.done}/{planned} done", f"{self.running} running", f"{self.failed} failed"]
        if self.objective:
            best = self.best
            if best is None or self.objective not in best.means:
                parts.append(f"best {self.objective} –")
            else:
                parts.append(
                    f"best {self.objective} {_value(best.means[self.objective])} (n={best.n}) {best.label}"
                )
        if self.elapsed_s is not None:
            parts.append(f"elapsed {duration(self.elapsed_s)}")
        if self.updated_s is not None:
            parts.append(f"updated {duration(self.updated_s)} ago")
        if self.show_eta:
            parts.append(f"ETA {'–' if self.eta_s is None else duration(self.eta_s)}")
        whole = f" — {self.whole.text(self.show_eta)}" if self.whole is not None else ""
        return head + " · ".join(parts) + whole

    def to_json(self) -> dict:
        data = asdict(self)
        if self.best is not None:  # what the line shows of it: the objective's mean
            data["best"]["means"] = {k: v for k, v in self.best.means.items() if k == self.objective}
        return data

    @classmethod
    def from_json(cls, data: dict) -> Snapshot:
        best = ConfigMean(**data["best"]) if data.get("best") else None
        whole = StudyCount(**data["whole"]) if data.get("whole") else None
        return cls(**{**data, "best": best, "whole": whole})


def duration(seconds: float) -> str:
    """'45s', '12m04s', '2h05m': what a person reads at a glance."""
    seconds = max(0, int(round(seconds)))
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def eta_s(ended: int, remaining: int, span_s: float) -> float | None:
    """Wall seconds per trial ended within `span_s` x trials left; None until something ended."""
    if ended <= 0 or remaining < 0 or not math.isfinite(span_s) or span_s < 0:
        return None
    return span_s / ended * remaining


def _value(value: float) -> str:
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.1f}"


@dataclass
class ProgressRecord:
    """The last line a study's driver printed, when (time.time()), and the study's state then."""

    snapshot: Snapshot
    written: float
    state: str = RUNNING  # running, finished, killed

    def status_snapshot(self, now: float) -> Snapshot:
        """The line as `study status` shows it `now`: "updated … ago" for the elapsed time and,
        while it runs, the ETAs less the time since."""
        age = max(0.0, now - self.written)
        snapshot = Snapshot.from_json(self.snapshot.to_json())
        snapshot.elapsed_s, snapshot.updated_s = None, age
        snapshot.show_eta = self.state == RUNNING
        for holder in (snapshot, snapshot.whole):
            if holder is not None and holder.eta_s is not None:
                holder.eta_s = max(0.0, holder.eta_s - age)
        return snapshot


def write(directory: Path, snapshot: Snapshot, state: str = RUNNING) -> None:
    """The execution's progress record holds `snapshot` (atomically: a reader never sees half)."""
    record = {"snapshot": snapshot.to_json(), "written": time.time(), "state": state}
    write_atomically(Path(directory) / PROGRESS_FILE, json.dumps(record, default=str))


def read(directory: Path) -> ProgressRecord | None:
    """The execution's progress record, None where there is none (begun before records) or it
    cannot be read (then `study status` reads MLflow instead)."""
    try:
        data = json.loads((Path(directory) / PROGRESS_FILE).read_text())
        return ProgressRecord(Snapshot.from_json(data["snapshot"]), float(data["written"]), data["state"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def mark(directory: Path, state: str) -> None:
    """Record how the study ended (`finished`, `killed`) on its last line; nothing without one."""
    record = read(directory)
    if record is not None:
        write(directory, record.snapshot, state)
