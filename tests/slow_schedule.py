"""How the `slow` tests are spread over the xdist workers (see tests/conftest.py): their measured
durations, kept in tests/durations.json, dealt longest first to the group with the least work.

A plain module beside the conftest (imported by name, like fixtures_cluster): a test module that
did `from conftest import ...` would get whichever of the suite's conftest files was imported last.
"""

from __future__ import annotations

import json
from pathlib import Path

# A new measurement replaces the recorded one only when it differs by more than this (fraction,
# and seconds), so that the file changes when a test's cost does, not with every run's jitter.
RECORD_TOLERANCE = (0.25, 5.0)


def read_durations(path: Path) -> dict[str, float]:
    return json.loads(path.read_text()) if path.is_file() else {}


def deal(durations: dict[str, float], groups: int, bundle_of: dict[str, str] | None = None) -> dict[str, int]:
    """nodeid -> group: longest first, each to the group with the least total so far (ties: the
    lower group, and equal durations in nodeid order, so the deal is the same on every worker).
    The tests of one bundle (`bundle_of`: nodeid -> bundle name) are dealt as one item of their
    summed duration, so that they share a group: tests of one session-scoped real service (a Ray
    cluster, an MLflow server) then start it on one worker, not on both, and its idle processes
    do not sit on the other worker's cores for the rest of the run."""
    bundle_of = bundle_of or {}
    members: dict[str, list[str]] = {}
    for nodeid in durations:
        members.setdefault(bundle_of.get(nodeid, nodeid), []).append(nodeid)
    weights = {item: sum(durations[n] for n in nodeids) for item, nodeids in members.items()}
    totals = [0.0] * groups
    group_of = {}
    for item, seconds in sorted(weights.items(), key=lambda entry: (-entry[1], entry[0])):
        group = min(range(groups), key=lambda g: (totals[g], g))
        group_of.update(dict.fromkeys(members[item], group))
        totals[group] += seconds
    return group_of


def merged_durations(
    recorded: dict[str, float], measured: dict[str, float], root: Path, tolerance=RECORD_TOLERANCE
) -> dict[str, float]:
    """The recorded durations with this run's measurements folded in (see RECORD_TOLERANCE);
    entries of test files that no longer exist under `root` (the rootdir) are dropped."""
    fraction, seconds = tolerance
    merged = dict(recorded)
    for nodeid, value in measured.items():
        old = recorded.get(nodeid)
        if old is None or abs(value - old) > max(fraction * old, seconds):
            merged[nodeid] = round(value, 1)
    return {k: v for k, v in sorted(merged.items()) if (root / k.split("::")[0]).is_file()}


def split_group(nodeid: str) -> tuple[str, str]:
    """(nodeid, xdist group): under `--dist loadgroup` a worker reports `tests/x.py::t[a@b]@group`
    (xdist appends the group; an `@` inside the parameters' brackets is the test's own)."""
    if nodeid.rfind("@") > nodeid.rfind("]"):
        plain, group = nodeid.rsplit("@", 1)
        return plain, group
    return nodeid, ""


class DurationRecorder:
    """A pytest plugin: sums setup, call and teardown of every slow test that passed (or skipped)
    and folds them into the durations file when the session ends. Registered on the xdist
    controller (or in a plain run), which sees every worker's reports."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = {}
        self.group: dict[str, str] = {}
        self.failed: set[str] = set()
        self.changed = 0

    def pytest_runtest_logreport(self, report) -> None:
        if "slow" not in report.keywords:
            return
        nodeid, group = split_group(report.nodeid)
        self.seconds[nodeid] = self.seconds.get(nodeid, 0.0) + report.duration
        self.group[nodeid] = group
        if report.failed:
            self.failed.add(nodeid)

    def pytest_sessionfinish(self, session) -> None:
        measured = {k: v for k, v in self.seconds.items() if k not in self.failed}
        if not measured:
            return
        recorded = read_durations(self.path)
        merged = merged_durations(recorded, measured, session.config.rootpath)
        self.changed = sum(merged.get(k) != recorded.get(k) for k in measured)
        if merged != recorded:
            self.path.write_text(json.dumps(merged, indent=1) + "\n")

    def pytest_terminal_summary(self, terminalreporter) -> None:
        """One line for the CI log: how long each group's slow tests took, what the file took in."""
        if not self.seconds:
            return
        totals: dict[str, float] = {}
        for nodeid, seconds in self.seconds.items():
            group = self.group[nodeid] or "one process"
            totals[group] = totals.get(group, 0.0) + seconds
        groups = ", ".join(f"{g} {s:.0f} s" for g, s in sorted(totals.items()))
        terminalreporter.write_line(
            f"slow tests: {groups}; {self.path.name}: {self.changed} of {len(self.seconds)} updated"
        )
