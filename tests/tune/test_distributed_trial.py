"""Multi-worker trials (`resources: {workers: 2, cpu: 1}`) on a real two-node Ray cluster: each
trial is a Ray Train TorchTrainer of two gloo workers, one per 1-CPU node, inside Tune. It trains
as one process would, is stopped early by ASHA, fails with its reason, and resumes exactly after
its driver was killed; MLflow has one child run per trial with world_size 2."""

from __future__ import annotations

import time

import pytest
import yaml
from study_helpers import child_runs, start_vitscale, vitscale, wait_or_kill

from vitscale.study import load_study, run_trial
from vitscale.train import fit

pytestmark = pytest.mark.slow

TRIAL = {
    "model": {"mixer": "attention", "width": 16, "depth": 1, "heads": 2, "patch_size": 4},
    "data": {"dataset": "digits", "resolution": 16, "num_train": 512, "num_val": 128},
    "train": {"epochs": 3, "batch_size": 64, "lr": 1.0e-2, "warmup_epochs": 0.5, "device": "cpu"},
}
# Two workers' final accuracy against one process's with the same global batch and seed. Their
# batches and augmentations are the same image for image (tests/train/test_distributed_fit.py);
# only the order of float sums differs: measured here, training losses equal to 1e-4 and
# accuracies one or two images apart (0.8 points each of 128 validation images), so 3 points.
TOLERANCE = 0.03


def _study(folder, name: str, **sections):
    path = folder / f"{name}.yaml"
    study = {"name": name, "trial": TRIAL, "resources": {"workers": 2, "cpu": 1}, **sections}
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def _history(uri: str, run, metric: str = "val_loss") -> list[int]:
    from mlflow import MlflowClient

    return [m.step for m in MlflowClient(tracking_uri=uri).get_metric_history(run.info.run_id, metric)]


@pytest.mark.timeout(2400)  # three trials, each starting two workers, on 2 shared cores
def test_asha_stops_a_two_worker_trial_and_a_diverging_one_fails_with_its_reason(ray_cluster, tmp_path):
    """Three trials of two workers each, one after another (the 2-CPU cluster holds one trial's
    workers at a time): lr 1e-2 trains all 3 epochs, lr 1e-7 stays at its initial accuracy and
    ASHA stops it after epoch 1 (so its workers must have let go of their CPUs for the next
    trial), lr 1e30 diverges and fails with that reason."""
    study = _study(
        tmp_path,
        "ddp-asha",
        space={"train.lr": {"grid": [1.0e-2, 1.0e-7, 1.0e30]}},
        search={"algorithm": "grid", "seeds": [0]},
        scheduler={"type": "asha", "grace_period": 1, "reduction_factor": 2},
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    command = ["study", "run", str(study), "--address", ray_cluster.gcs_address, "--tracking-uri", uri]
    command += ["--storage", str(tmp_path / "results"), "--quiet", "--set", "trial.train.grad_clip=null"]
    proc = vitscale(*command, cwd=tmp_path, timeout=1500)
    assert "3 trials — 1 finished, 1 stopped early, 1 failed" in proc.stdout.replace("\n", " "), proc.stdout
    runs = {float(r.data.params["train.lr"]): r for r in child_runs(uri, "ddp-asha")}
    assert sorted(runs) == [1.0e-7, 1.0e-2, 1.0e30]
    good, slow, diverged = runs[1.0e-2], runs[1.0e-7], runs[1.0e30]
    assert good.data.params["world_size"] == slow.data.params["world_size"] == "2"  # params: at the end
    assert good.data.tags["vitscale.status"] == "FINISHED" and _history(uri, good) == [1, 2, 3]
    assert "test_top1" in good.data.metrics
    assert slow.data.tags["vitscale.stopped_early"] == "true" and _history(uri, slow) == [1]
    assert "test_top1" not in slow.data.metrics
    assert diverged.data.tags["vitscale.status"] == "FAILED"
    assert diverged.data.tags["vitscale.failure_reason"].startswith(
        "diverged: loss became non-finite at epoch 1"
    )


@pytest.mark.timeout(2400)
def test_a_killed_driver_resumes_the_two_worker_trial_exactly(ray_cluster, tmp_path):
    """The driver is killed once the trial's epoch-2 checkpoint is in storage; `study resume`
    restores it on both workers and finishes. MLflow has every epoch once, world_size 2 and
    test_top1, and the result is one process's (same global batch and seed) within TOLERANCE."""
    epochs = 6
    study = _study(tmp_path, "ddp-resume", search={"algorithm": "grid", "seeds": [0]})
    results, uri = tmp_path / "results", f"sqlite:///{tmp_path / 'mlflow.db'}"
    common = ["--address", ray_cluster.gcs_address, "--tracking-uri", uri, "--storage", str(results)]
    common += ["--set", f"trial.train.epochs={epochs}"]
    with open(tmp_path / "driver.log", "w") as log:
        driver = start_vitscale("study", "run", str(study), *common, "--quiet", cwd=tmp_path, log=log)
        deadline = time.time() + 900
        while not list(results.glob("ddp-resume/*/*/checkpoint_000001/checkpoint.pt")):
            if driver.poll() is not None or time.time() > deadline:
                driver.kill()
                pytest.fail(
                    f"no epoch-2 checkpoint before the study ended:\n{(tmp_path / 'driver.log').read_text()}"
                )
            time.sleep(0.2)
        driver.kill()
        wait_or_kill(driver)
    assert not list(results.glob("ddp-resume/*/*/checkpoint_000003")), "the trial finished before the kill"

    resume = [
        "study",
        "resume",
        "ddp-resume",
        "--address",
        ray_cluster.gcs_address,
        "--storage",
        str(results),
    ]
    proc = vitscale(*resume, "--quiet", cwd=tmp_path, timeout=900)
    assert "1 trials — 1 finished" in proc.stdout.replace("\n", " "), proc.stdout
    [run] = child_runs(uri, "ddp-resume")
    assert run.data.tags["vitscale.status"] == "FINISHED" and run.data.params["world_size"] == "2"
    assert _history(uri, run) == list(range(1, epochs + 1))  # each epoch once, across the kill

    spec = load_study(study, [f"trial.train.epochs={epochs}"])
    one = fit(run_trial(spec, {}, 0)).metrics  # one process, same global batch, seed and threads
    assert one["world_size"] == 1.0
    assert abs(run.data.metrics["test_top1"] - one["test_top1"]) <= TOLERANCE
    assert abs(run.data.metrics["val_top1"] - one["val_top1"]) <= TOLERANCE
