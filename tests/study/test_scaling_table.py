"""studies/scaling_table.py: the isoFLOP grid of docs/results.md, each mixer's best per budget bold."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "studies" / "scaling_table.py"


def _module():
    spec = importlib.util.spec_from_file_location("scaling_table", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_grid_bolds_each_mixers_best_per_budget_and_takes_the_lr_from_the_lr_study():
    table = _module()
    cells = {
        (1.6e12, "attention", (16, 2)): (85.5, 8e-3, 7802),
        (1.6e12, "ssog", (16, 2)): (84.4, 4e-3, 6042),
        (1.6e12, "attention", (16, 4)): (85.3, 4e-3, 14410),
        (1.6e12, "ssog", (16, 4)): (85.4, 4e-3, 11514),
        (3.2e12, "attention", (16, 4)): (87.3, 4e-3, 14410),
        (3.2e12, "ssog", (16, 4)): (87.1, 4e-3, 11514),
    }
    lines = table.markdown(cells).splitlines()
    assert lines[0].count("FLOPs: attention / SSoG") == 2
    depth2, depth4 = lines[2], lines[3]
    assert depth2.startswith("| 16 · 2 (") and "| 0.008 / 0.004 |" in depth2
    assert "**85.5** / 84.4" in depth2 and "| – / – |" in depth2  # no 3.2e12 run at depth 2
    assert "85.3 / **85.4**" in depth4 and "**87.3** / **87.1**" in depth4
