"""Suite-wide fixtures: the real local Ray cluster and MLflow server live in fixtures_cluster.

`make test` runs the suite on two xdist workers (`--dist loadgroup`). The `slow` tests (real Ray
clusters, MLflow servers, studies killed and resumed) are split by file into two groups, each run
one test after another on one worker, so at most two of them share the 2-core CI machine at once
(one group ran 20.5 min on its own; the rest of the suite takes less than half that).
"""

import pytest

pytest_plugins = ["fixtures_cluster"]

PROCESS_GROUPS = 2  # xdist groups the `slow` tests are split into, by file


def pytest_collection_modifyitems(config, items):
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    files = sorted({item.nodeid.split("::")[0] for item in slow})  # dealt out in turn: a stable split
    group_of = {name: i % PROCESS_GROUPS for i, name in enumerate(files)}
    for item in slow:
        item.add_marker(pytest.mark.xdist_group(f"processes-{group_of[item.nodeid.split('::')[0]]}"))
