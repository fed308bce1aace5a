"""Which params split a study's configurations in the report: a study axis beyond mixer x regime x
width (a distillation weight) is shown; a value that only follows the mixer (its teacher) is not."""

from __future__ import annotations

import pyarrow as pa

from vitscale.analysis.statistics.fronts import splitting_settings


def test_only_params_that_vary_inside_a_cell_split_configurations() -> None:
    agg = pa.table(
        {
            "mixer": ["attention", "attention", "ssog", "ssog"],
            "regime": ["ode"] * 4,
            "width": [64] * 4,
            "train.distill.weight": [0.0, 0.3, 0.0, 0.3],
            "train.distill.teacher_run_id": ["a", "a", "s", "s"],  # one teacher per mixer
            "train.lr": [5e-3] * 4,  # fixed
            "model.mixer": ["attention", "attention", "ssog", "ssog"],
        }
    )
    params = ["train.distill.weight", "train.distill.teacher_run_id", "train.lr", "model.mixer"]
    assert splitting_settings(agg, params) == ["train.distill.weight"]
    assert splitting_settings(agg.slice(0, 1), params) == []  # one configuration: nothing splits
