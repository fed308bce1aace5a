"""Suite-wide fixtures and scheduling: the real local Ray cluster and MLflow server live in
fixtures_cluster; the `slow` mark, its guard and the balance of the `slow` tests live here.

`make test` runs the suite on two xdist workers (`--dist loadgroup`). The `slow` tests (real Ray
clusters and studies, MLflow servers, studies killed and resumed) are dealt into two xdist groups,
each run one test after another on one worker, so at most two of them share the 2-core CI machine
at once; the other tests fill in around them. The deal is by measured duration (tests/durations.json,
which every run that passes slow tests updates): longest first, each to the group with less work so
far, so the two groups end together (dealt by file name, one group ran 20.5 min while the other
had finished). A slow test not measured yet counts as the median of the measured ones. The tests
that request a session-scoped real service (REAL_SERVICE_FIXTURES) are dealt as one bundle into
one group, so that only one worker starts the two-node Ray cluster and the MLflow server.

A test that starts Ray must be marked `slow`: tests that request a real service fixture are marked
here, and a test without the mark that starts Ray anyway (in this process or in a `vitscale`
subprocess) fails, naming the mark.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
from pathlib import Path

import pytest

from slow_schedule import DurationRecorder, deal, read_durations, split_group

try:  # pytest >= 9: a node's id (see scheduled_in_group)
    from _pytest.nodeid import coerce_node_id
except ImportError:  # pytest 8: xdist's own suffix is read
    coerce_node_id = None

# An xdist worker starts with COLUMNS=80 in its environment (a single process does not), and the
# CLI's console honours COLUMNS: its tables would fold at 80 columns under `make test` only. A test
# that wants a width sets it (monkeypatch.setenv).
os.environ.pop("COLUMNS", None)

pytest_plugins = ["fixtures_cluster", "pytester"]  # pytester: tests/test_slow_marks.py

PROCESS_GROUPS = 2  # xdist groups the `slow` tests are dealt into
DURATIONS_FILE = Path(__file__).with_name("durations.json")  # nodeid -> seconds, slow tests only
DEFAULT_DURATION = 60.0  # seconds for a slow test when nothing is measured at all
REAL_SERVICE_FIXTURES = ("ray_cluster", "mlflow_server")  # fixtures_cluster: real processes
SERVICES_BUNDLE = "the session's real services"  # their tests share one group (slow_schedule.deal)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    """Around every plugin's: marks and groups before `-m "not slow"` deselects by the mark; then,
    on an xdist worker, each grouped test's nodeid carries its group (see `scheduled_in_group`)."""
    mark_and_deal(items)
    result = yield
    if config.getoption("loadgroup", default=False):  # set on xdist workers of --dist loadgroup
        for item in items:
            scheduled_in_group(item)
    return result


def scheduled_in_group(item) -> None:
    """xdist's loadgroup schedules by an `@group` suffix on a worker's nodeids, which xdist 3.8
    writes to `item._nodeid`; pytest 9 reads nodeids from `item._id`, so the suffix was dropped and
    every `xdist_group` ignored (each slow test scheduled on its own). Set it where pytest reads it."""
    groups = sorted({str(m.args[0]) for m in item.iter_markers("xdist_group") if m.args})
    if groups and split_group(item.nodeid)[1] == "" and coerce_node_id is not None:
        item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


def mark_and_deal(items) -> None:
    for item in items:
        if item.get_closest_marker("slow") is None and set(REAL_SERVICE_FIXTURES) & set(item.fixturenames):
            item.add_marker(pytest.mark.slow)
    slow = [item.nodeid for item in items if item.get_closest_marker("slow") is not None]
    recorded = read_durations(DURATIONS_FILE)
    known = [recorded[n] for n in slow if n in recorded]
    default = statistics.median(known) if known else DEFAULT_DURATION
    # One bundle for the tests of the session's real services: one cluster and one server per run.
    bundle_of = {
        item.nodeid: SERVICES_BUNDLE for item in items if set(REAL_SERVICE_FIXTURES) & set(item.fixturenames)
    }
    group_of = deal({n: recorded.get(n, default) for n in slow}, PROCESS_GROUPS, bundle_of)
    for item in items:
        if item.nodeid in group_of:
            item.add_marker(pytest.mark.xdist_group(f"processes-{group_of[item.nodeid]}"))


def pytest_configure(config):
    if not hasattr(config, "workerinput"):  # the xdist controller sees every worker's reports
        config.pluginmanager.register(DurationRecorder(DURATIONS_FILE), "vitscale-durations")


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
