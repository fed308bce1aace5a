"""A tracking server that goes away mid-study: the study rides it out and nothing is lost.

The real thing, as a user meets it: `mlflow server` started by infra/local/mlflow-up.sh, stopped by
mlflow-down.sh while trials train, kept down for over 30 s, then started again on the same port.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "tune")]
pytest_plugins = ["fixtures_cluster"]

from study_helpers import child_runs, start_vitscale, write_study  # noqa: E402

pytestmark = pytest.mark.slow

EPOCHS = 14
OUTAGE_S = 35


def _epochs_logged(uri: str, study: str) -> int:
    try:
        runs = child_runs(uri, study)
    except Exception:
        return 0
    # `epoch` is every metric's step, not a metric of its own (tracking.layout)
    client = MlflowClient(tracking_uri=uri)
    return sum(len(client.get_metric_history(r.info.run_id, "val_loss")) for r in runs)


def test_study_rides_out_a_tracking_server_outage(tmp_path):
    from mlflow import MlflowClient

    from fixtures_cluster import free_port, start_mlflow_server, stop_mlflow_server

    root = tmp_path / "mlflow"
    root.mkdir()
    port = free_port()
    uri = start_mlflow_server(root, port=port).uri
    study = write_study(
        tmp_path,
        "outage-tiny",
        space={
            "model.mixer": {"grid": ["attention", "ssog"]},
            "model.regime": {"grid": ["discrete", "looped"]},
        },
        search={"algorithm": "grid", "max_concurrent_trials": 2},
    )
    args = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(tmp_path / "results")]
    args += ["--num-cpus", "2", "--quiet", "--set", f"trial.train.epochs={EPOCHS}"]
    args += ["--set", "trial.data.num_train=768"]
    log = (tmp_path / "driver.log").open("w")
    driver = start_vitscale(*args, cwd=tmp_path, log=log)
    try:
        deadline = time.time() + 300
        while _epochs_logged(uri, "outage-tiny") < 1:
            assert driver.poll() is None and time.time() < deadline, (tmp_path / "driver.log").read_text()
            time.sleep(1)
        stop_mlflow_server(port, str(root))
        down_at = time.time()
        time.sleep(OUTAGE_S)
        assert driver.poll() is None, (
            "the study ended during the outage:\n" + (tmp_path / "driver.log").read_text()
        )
        start_mlflow_server(root, port=port)  # the same port it just released
        outage = time.time() - down_at
        rc = driver.wait(timeout=900)
    finally:
        if driver.poll() is None:
            driver.kill()
        stop_mlflow_server(port, str(root))
    output = (tmp_path / "driver.log").read_text()
    assert rc == 0, output[-5000:]
    assert outage >= 30

    # Read back from the store itself: every epoch of every trial is there, in order, once.
    client = MlflowClient(tracking_uri=f"sqlite:///{root / 'mlflow.db'}")
    runs = child_runs(f"sqlite:///{root / 'mlflow.db'}", "outage-tiny")
    assert len(runs) == 4, output[-3000:]
    for run in runs:
        assert run.data.tags["vitscale.status"] == "FINISHED" and run.info.status == "FINISHED"
        for key in ("val_top1", "train_loss", "val_loss"):
            steps = [m.step for m in client.get_metric_history(run.info.run_id, key)]
            assert steps == list(range(1, EPOCHS + 1)), (run.info.run_name, key, steps)
    assert "none lost" in output, output[-3000:]
