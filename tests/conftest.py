"""Suite-wide fixtures and scheduling: the real local Ray cluster and MLflow server live in
fixtures_cluster; the `slow` mark, its guard and the balance of the `slow` tests live here.

`make test` runs the suite on two xdist workers (`--dist loadgroup`). The `slow` tests (real Ray
clusters and studies, MLflow servers, studies killed and resumed) are dealt into two xdist groups,
each run one test after another on one worker, so at most two of them share the 2-core CI machine
at once; the other tests fill in around them. The deal is by measured duration (tests/durations.json,
which every run that passes slow tests updates): longest first, each to the group with less work so
far, so the two groups end together (dealt by file name, one group ran 20.5 min while the other
had finished). A slow test not measured yet counts as the median of the measured ones.

A test that starts Ray must be marked `slow`: tests that request a real service fixture are marked
here, and a test without the mark that starts Ray anyway (in this process or in a `vitscale`
subprocess) fails, naming the mark.
"""

from __future__ import annotations

import json
import shutil
import statistics
import tempfile
from pathlib import Path

import pytest

pytest_plugins = ["fixtures_cluster", "pytester"]  # pytester: tests/test_slow_marks.py

PROCESS_GROUPS = 2  # xdist groups the `slow` tests are dealt into
DURATIONS_FILE = Path(__file__).with_name("durations.json")  # nodeid -> seconds, slow tests only
DEFAULT_DURATION = 60.0  # seconds for a slow test when nothing is measured at all
REAL_SERVICE_FIXTURES = ("ray_cluster", "mlflow_server")  # fixtures_cluster: real processes
# A new measurement replaces the recorded one only when it differs by more than this (fraction,
# and seconds), so that the file changes when a test's cost does, not with every run's jitter.
RECORD_TOLERANCE = (0.25, 5.0)


def read_durations(path: Path = DURATIONS_FILE) -> dict[str, float]:
    return json.loads(path.read_text()) if path.is_file() else {}


def deal(durations: dict[str, float], groups: int) -> dict[str, int]:
    """nodeid -> group: longest first, each to the group with the least total so far (ties: the
    lower group, and equal durations in nodeid order, so the deal is the same on every worker)."""
    totals = [0.0] * groups
    group_of = {}
    for nodeid, seconds in sorted(durations.items(), key=lambda item: (-item[1], item[0])):
        group = min(range(groups), key=lambda g: (totals[g], g))
        group_of[nodeid] = group
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


@pytest.hookimpl(tryfirst=True)  # before `-m "not slow"` deselects by the mark
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is None and set(REAL_SERVICE_FIXTURES) & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    slow = [item.nodeid for item in items if item.get_closest_marker("slow") is not None]
    recorded = read_durations()
    known = [recorded[n] for n in slow if n in recorded]
    default = statistics.median(known) if known else DEFAULT_DURATION
    group_of = deal({n: recorded.get(n, default) for n in slow}, PROCESS_GROUPS)
    for item in items:
        if item.nodeid in group_of:
            item.add_marker(pytest.mark.xdist_group(f"processes-{group_of[item.nodeid]}"))


class DurationRecorder:
    """Sums setup, call and teardown of every slow test that passed (or skipped), and writes them
    into tests/durations.json when the session ends (on the xdist controller, or a plain run)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.failed: set[str] = set()

    def pytest_runtest_logreport(self, report) -> None:
        if "slow" not in report.keywords:
            return
        self.seconds[report.nodeid] = self.seconds.get(report.nodeid, 0.0) + report.duration
        if report.failed:
            self.failed.add(report.nodeid)

    def pytest_sessionfinish(self, session) -> None:
        measured = {k: v for k, v in self.seconds.items() if k not in self.failed}
        if not measured:
            return
        recorded = read_durations()
        merged = merged_durations(recorded, measured, session.config.rootpath)
        if merged != recorded:
            DURATIONS_FILE.write_text(json.dumps(merged, indent=1) + "\n")


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the xdist controller sees every worker's reports
        config.pluginmanager.register(DurationRecorder(), "vitscale-durations")


@pytest.fixture(autouse=True)
def _ray_only_in_slow_tests(request, monkeypatch):
    """Ray started by a test not marked slow fails it. Such a test gets its own RAY_TMPDIR (which
    `ray.init` and the `vitscale` subprocesses it runs inherit): a Ray session folder in it after
    the test means Ray ran."""
    if request.node.get_closest_marker("slow") is not None:
        yield
        return
    ray_tmp = tempfile.mkdtemp(prefix="vsg-", dir="/tmp")  # short: Ray's socket paths live under it
    monkeypatch.setenv("RAY_TMPDIR", ray_tmp)
    try:
        yield
        sessions = sorted(Path(ray_tmp).glob("ray/session_*"))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    if sessions:
        pytest.fail(
            f"{request.node.nodeid} started Ray ({sessions[0].name}): mark it @pytest.mark.slow "
            "(real Ray runs one slow test at a time per worker; see tests/conftest.py)",
            pytrace=False,
        )
