"""Inside a study, unreadable data ends the trial as FAILED with reason data_error: reported, not
raised (Tune would retry it and record a traceback), and the study goes on."""

from __future__ import annotations

from pathlib import Path
from unittest import mock

import pytest

from vitscale.study import load_study
from vitscale.tune.trainable import train_trial

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_data_error_in_a_trial_is_a_failed_result_with_a_reason(tmp_path, cifar, damage):
    pytest.importorskip("ray")
    root = tmp_path / "cifar-10-python.tar.gz"
    if damage == "truncated":
        raw = cifar.archive_bytes("cifar10", cifar.files("cifar10", per_batch=2))
        root.write_bytes(raw[: len(raw) // 2])
    spec = load_study(
        ROOT / "studies/quickstart.yaml",
        ["trial.data.dataset=cifar10", f"trial.data.root={root}", "trial.train.epochs=1"],
    )
    reports = []
    with (
        mock.patch("ray.get_runtime_context") as context,
        mock.patch("ray.tune.get_checkpoint", return_value=None),
        mock.patch("ray.tune.report", side_effect=lambda metrics, **_: reports.append(metrics)),
    ):
        context.return_value.get_node_id.return_value = "node"
        train_trial({"point": {}, "seed": 0}, spec)  # does not raise
    [final] = reports
    assert final["failure_reason"] == "data_error"
    assert str(root) in final["failure_message"] and "\n" not in final["failure_message"]
