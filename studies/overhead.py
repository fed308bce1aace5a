"""How much of a finished study's trial-slot time went into training epochs: a measurement of a
study already run, read back from MLflow (studies/load_benchmark.py reports it after its load run).

Definitions (all read back from MLflow, the study's record):

- a trial's interval: its child run's start_time to end_time, i.e. the driver's Tune
  `on_trial_start` (a fresh or reused worker got the trial) to `on_trial_complete`;
- span: the first trial's start to the last trial's end (the driver's Ray start, before the
  first trial, is shown apart as `before_first_trial_s`);
- slots: the study's concurrency, measured as the largest number of trial intervals that
  overlap at any instant (pass `--slots` to use a nominal figure instead);
- slot time = slots x span: what the study held;
- epoch time: the sum of `epoch_seconds` (train + validation of one epoch, as `train.fit`
  reports it) over every epoch of every trial;
- in-epochs share = epoch time / slot time. Everything else — worker start, imports, data
  loading, model build, checkpoints, the final test evaluation, Tune's scheduling — is overhead.
  `trial_share` divides by the sum of trial intervals instead (overhead inside the trials only).
- where the slot time went (`Breakdown`), from the times the driver received each epoch's result
  (its metrics' timestamps): the epochs; a trial's start to its first result, less that epoch
  (worker start-up, data, model build, the first result's trip); between two results, less the
  later epoch (the checkpoint, and the report's round trip where the trial waits for it); the last
  result to the trial's end; between one trial's end and the next start in the same slot; and the
  rest: slots idle (before the first trial of a slot, after its last).

    python studies/overhead.py quickstart --tracking-uri sqlite:///mlflow.db [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass

from vitscale.errors import UserError
from vitscale.tracking import layout, store
from vitscale.tracking.store import search_all


@dataclass
class TrialTimes:
    start: float
    end: float
    results: list[tuple[float, float]]  # (received at, epoch_seconds), in epoch order


@dataclass
class Breakdown:
    """Seconds of slot time, by where they went (see the module docstring)."""

    epochs: float
    to_first_result: float
    between_results: float
    after_last_result: float
    between_trials: float
    idle: float

    def line(self, slot_s: float) -> str:
        parts = [
            ("epochs", self.epochs),
            ("start -> first result", self.to_first_result),
            ("between results", self.between_results),
            ("last result -> end", self.after_last_result),
            ("between trials", self.between_trials),
            ("slots idle", self.idle),
        ]
        return "where slot time went: " + ", ".join(f"{name} {100 * v / slot_s:.1f} %" for name, v in parts)


def breakdown(trials: list[TrialTimes], slots: int) -> Breakdown:
    """Split `slots` x span over `trials`. A trial is placed in the slot that freed last before it
    started (trials in one slot run one after another)."""
    parts = dict.fromkeys(("epochs", "to_first_result", "between_results", "after_last_result"), 0.0)
    for t in trials:
        if not t.results:
            continue
        parts["epochs"] += sum(d for _, d in t.results)
        parts["to_first_result"] += t.results[0][0] - t.start - t.results[0][1]
        parts["between_results"] += sum(
            t.results[i][0] - t.results[i - 1][0] - t.results[i][1] for i in range(1, len(t.results))
        )
        parts["after_last_result"] += t.end - t.results[-1][0]
    free: list[float] = []  # each slot's last end
    between = 0.0
    for t in sorted(trials, key=lambda t: t.start):
        ready = [i for i, end in enumerate(free) if end <= t.start]
        if ready:
            i = max(ready, key=lambda i: free[i])
            between += t.start - free[i]
            free[i] = t.end
        else:
            free.append(t.end)
    span = max(t.end for t in trials) - min(t.start for t in trials)
    idle = slots * span - sum(parts.values()) - between
    return Breakdown(**parts, between_trials=between, idle=idle)


@dataclass
class Overhead:
    study: str
    parent_run_id: str
    trials: int
    epochs: int
    epoch_s: float
    span_s: float
    slots: int
    slot_s: float
    share: float  # epoch_s / slot_s
    trial_s: float  # sum of the trials' own intervals
    trial_share: float
    before_first_trial_s: float  # parent run start -> first trial start (Ray start, search setup)
    mean_trial_s: float
    breakdown: Breakdown

    def lines(self) -> list[str]:
        return [
            f"{self.study}: {self.trials} trials, {self.epochs} epochs, {self.epoch_s:.1f} s in epochs",
            f"span {self.span_s:.1f} s (first trial start -> last trial end) x {self.slots} slots "
            f"= {self.slot_s:.1f} s slot time",
            f"in epochs: {100 * self.share:.1f} % of slot time, {100 * self.trial_share:.1f} % of trial time "
            f"({self.trial_s:.1f} s; mean trial {self.mean_trial_s:.1f} s)",
            f"before the first trial: {self.before_first_trial_s:.1f} s (driver: Ray start, setup)",
            self.breakdown.line(self.slot_s),
        ]


def peak_overlap(intervals: list[tuple[float, float]]) -> int:
    """The largest number of intervals open at one instant (an end at t closes before a start at t)."""
    events = sorted(
        [(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals], key=lambda x: (x[0], x[1])
    )
    peak = now = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def measure(client, study: str, parent_run_id: str | None = None, slots: int | None = None) -> Overhead:
    quoted = study.replace("'", "\\'")
    if parent_run_id is None:
        experiments = [e.experiment_id for e in client.search_experiments()]
        parents = search_all(
            client, experiments, f"tags.`{layout.ROLE}` = 'study' AND tags.`{layout.STUDY}` = '{quoted}'"
        )
        if not parents:
            raise UserError(f"study '{study}' not found in this MLflow store; pass --tracking-uri")
        parent = max(parents, key=lambda r: r.info.start_time or 0)
    else:
        parent = client.get_run(parent_run_id)
    filt = f"tags.`{layout.PARENT_RUN_ID}` = '{parent.info.run_id}'"
    runs = [
        r
        for r in search_all(client, [parent.info.experiment_id], filt)
        if r.data.tags.get(layout.ROLE) == "trial" and r.info.end_time
    ]
    if not runs:
        raise UserError(f"study '{study}': no finished trial runs under parent run {parent.info.run_id}")
    intervals = [(r.info.start_time / 1000, r.info.end_time / 1000) for r in runs]
    epoch_s, epochs, times = 0.0, 0, []
    for run, (start, end) in zip(runs, intervals, strict=True):
        history = sorted(client.get_metric_history(run.info.run_id, "epoch_seconds"), key=lambda m: m.step)
        epoch_s += sum(m.value for m in history)
        epochs += len(history)
        times.append(TrialTimes(start, end, [(m.timestamp / 1000, m.value) for m in history]))
    first, last = min(s for s, _ in intervals), max(e for _, e in intervals)
    span = last - first
    k = slots or peak_overlap(intervals)
    trial_s = sum(e - s for s, e in intervals)
    return Overhead(
        study=study,
        parent_run_id=parent.info.run_id,
        trials=len(runs),
        epochs=epochs,
        epoch_s=epoch_s,
        span_s=span,
        slots=k,
        slot_s=k * span,
        share=epoch_s / (k * span) if span > 0 else float("nan"),
        trial_s=trial_s,
        trial_share=epoch_s / trial_s if trial_s > 0 else float("nan"),
        before_first_trial_s=first - parent.info.start_time / 1000,
        mean_trial_s=trial_s / len(runs),
        breakdown=breakdown(times, k),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python studies/overhead.py", description=__doc__.split("\n")[0])
    parser.add_argument("study")
    parser.add_argument("--tracking-uri", default=layout.DEFAULT_TRACKING_URI)
    parser.add_argument("--parent-run-id", default=None, help="an execution other than the newest")
    parser.add_argument("--slots", type=int, default=None, help="nominal concurrency (default: measured)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    try:
        result = measure(store.client_for(args.tracking_uri), args.study, args.parent_run_id, args.slots)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(asdict(result), indent=2) if args.json else "\n".join(result.lines()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
