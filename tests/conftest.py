"""Suite-wide fixtures: the real local Ray cluster and MLflow server live in fixtures_cluster.

`make test` runs the suite on two xdist workers (`--dist loadgroup`). The `slow` tests (real Ray
clusters, MLflow servers, studies killed and resumed) share one group, so one worker runs them
one after another while the other works through the rest: two of them at once on a 2-core CI
machine would each run at half speed against timeouts sized for one.
"""

import pytest

pytest_plugins = ["fixtures_cluster"]

PROCESS_GROUP = "processes"  # the xdist group of every `slow` test


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.get_closest_marker("slow") is not None:
            item.add_marker(pytest.mark.xdist_group(PROCESS_GROUP))
