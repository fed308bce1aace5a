"""tests/conftest.py and slow_schedule.py: the `slow` tests dealt into two xdist groups by measured
duration, the durations file the suite keeps, and the guard that fails a test starting Ray without the mark
(run on a copy of the conftest in pytester's folder)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from slow_schedule import deal, merged_durations, split_group

TESTS = Path(__file__).resolve().parent


def test_the_deal_is_longest_first_to_the_lighter_group():
    durations = {"a": 10.0, "b": 8.0, "c": 7.0, "d": 5.0, "e": 4.0, "f": 3.0}
    group_of = deal(durations, 2)
    totals = [sum(s for n, s in durations.items() if group_of[n] == g) for g in (0, 1)]
    assert group_of == {"a": 0, "b": 1, "c": 1, "d": 0, "e": 0, "f": 1}
    assert totals == [19.0, 18.0]  # by name in turn (a, c, e | b, d, f): 21 against 16
    assert deal({"x": 1.0, "y": 1.0}, 2) == {"x": 0, "y": 1}  # equal durations: in nodeid order


def test_a_bundle_is_dealt_as_one_item_of_its_summed_duration_into_one_group():
    durations = {"a": 10.0, "b": 8.0, "s1": 5.0, "s2": 4.0, "s3": 3.0}
    group_of = deal(durations, 2, {"s1": "services", "s2": "services", "s3": "services"})
    assert group_of == {"s1": 0, "s2": 0, "s3": 0, "a": 1, "b": 1}  # 12 s of services, then 10 + 8
    assert deal(durations, 2)["s1"] != deal(durations, 2)["s2"]  # unbundled, they would part


def test_the_durations_file_takes_a_measurement_that_moved_and_forgets_deleted_files():
    here = "tests/test_slow_marks.py::t"
    recorded = {here + "1": 100.0, here + "2": 100.0, "tests/no_such_file.py::t": 5.0}
    measured = {here + "1": 110.0, here + "2": 200.0, here + "3": 1.0}
    merged = merged_durations(recorded, measured, TESTS.parent)
    assert merged == {here + "1": 100.0, here + "2": 200.0, here + "3": 1.0}


def test_a_workers_nodeid_loses_the_group_xdist_appended_and_keeps_its_own_at_signs():
    assert split_group("tests/a.py::t@processes-1") == ("tests/a.py::t", "processes-1")
    assert split_group("tests/a.py::t[x@y]") == ("tests/a.py::t[x@y]", "")
    assert split_group("tests/a.py::t[x@y]@processes-0") == ("tests/a.py::t[x@y]", "processes-0")


def test_every_recorded_duration_names_a_slow_test_that_exists():
    """tests/durations.json is what the deal reads: seconds per slow test, files that exist."""
    recorded = json.loads((TESTS / "durations.json").read_text())
    assert recorded and all(isinstance(v, (int, float)) and v >= 0 for v in recorded.values())
    assert all((TESTS.parent / nodeid.split("::")[0]).is_file() for nodeid in recorded)


@pytest.fixture
def suite(pytester):
    """pytester's folder with this suite's conftest (and the cluster fixtures it loads)."""
    for name in ("conftest.py", "fixtures_cluster.py", "slow_schedule.py"):
        shutil.copy(TESTS / name, pytester.path / name)
    return pytester


INNER = """
import os, subprocess, sys
from pathlib import Path
import pytest

@pytest.fixture
def ray_cluster():  # stands in for the real one: requesting it is what marks a test slow
    return None

def test_unmarked_but_asks_for_a_cluster(request, ray_cluster):
    assert request.node.get_closest_marker("slow") is not None

def test_unmarked_and_starts_ray():
    Path(os.environ["RAY_TMPDIR"], "ray", "session_2026_fake").mkdir(parents=True)

def test_unmarked_and_no_ray():
    assert os.environ["RAY_TMPDIR"].startswith("/tmp/vsg-")

@pytest.mark.slow
def test_marked_and_starts_ray(tmp_path):
    Path(tmp_path, "ray", "session_2026_fake").mkdir(parents=True)
"""


def test_a_test_that_starts_ray_without_the_mark_fails_and_one_asking_for_a_cluster_is_marked(suite):
    suite.makepyfile(test_inner=INNER)
    result = suite.runpytest("-p", "no:cacheprovider")
    result.assert_outcomes(passed=4, errors=1)  # starts_ray: its call passed, the guard errs after
    result.stdout.fnmatch_lines(
        ["*test_unmarked_and_starts_ray started Ray (session_2026_fake): mark it @pytest.mark.slow*"]
    )
    result.stdout.fnmatch_lines(["slow tests: one process * s; durations.json: 2 of 2 updated"])
    recorded = json.loads((suite.path / "durations.json").read_text())
    assert set(recorded) == {  # the slow ones that passed, one marked by its fixture
        "test_inner.py::test_unmarked_but_asks_for_a_cluster",
        "test_inner.py::test_marked_and_starts_ray",
    }


def test_make_tests_two_workers_each_run_one_slow_group_and_the_file_keeps_plain_nodeids(suite):
    """As `make test` runs: xdist's loadgroup appends each slow test's group to its nodeid on the
    worker; the controller records the test under its own name and prints each group's time."""
    suite.makepyfile(
        test_inner="""
import pytest

@pytest.mark.slow
def test_a():
    pass

@pytest.mark.slow
@pytest.mark.parametrize("x", ["p@q"])
def test_b(x):
    pass

def test_fast():
    pass
"""
    )
    result = suite.runpytest("-p", "no:cacheprovider", "-n", "2", "--dist", "loadgroup")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["slow tests: processes-0 * s, processes-1 * s; durations.json: 2 of 2 updated"]
    )
    recorded = json.loads((suite.path / "durations.json").read_text())
    assert set(recorded) == {"test_inner.py::test_a", "test_inner.py::test_b[p@q]"}


@pytest.mark.slow
def test_the_guard_sees_a_real_ray_started_in_a_subprocess(suite):
    """Ray itself puts its session under RAY_TMPDIR, in a child process too (as `vitscale study
    run` in a subprocess): what the guard relies on."""
    suite.makepyfile(
        test_inner="""
import subprocess, sys

def test_runs_ray_in_a_child():
    code = "import ray; ray.init(num_cpus=1, include_dashboard=False); ray.shutdown()"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
"""
    )
    result = suite.runpytest_subprocess("-p", "no:cacheprovider", timeout=600)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(
        ["*test_runs_ray_in_a_child started Ray (session_*): mark it @pytest.mark.slow*"]
    )
