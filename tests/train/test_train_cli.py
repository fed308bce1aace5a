"""`vitscale train`: JSON metrics, one MLflow run with its checkpoint, resume, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
import torch
from mlflow import MlflowClient

from vitscale.cli import main
from vitscale.precision import cpu_has_native_bf16

TINY = [
    "--mixer",
    "ssog",
    "--width",
    "16",
    "--depth",
    "1",
    "--heads",
    "2",
    "--patch-size",
    "4",
    "--resolution",
    "16",
    "--batch-size",
    "64",
]


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code or 0
    out, err = capsys.readouterr()
    return code, out, err


def test_train_prints_json_and_logs_one_run_with_the_checkpoint(capsys, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    code, out, err = run(
        capsys,
        "train",
        *TINY,
        "--epochs",
        "2",
        "--json",
        "--tracking-uri",
        uri,
        "--checkpoint-dir",
        str(tmp_path / "ckpt"),
    )
    assert code == 0, err
    metrics = json.loads(out.strip().splitlines()[-1])
    assert metrics["epoch"] == 2 and 0 <= metrics["val_top1"] <= 1 and metrics["params"] > 0
    client = MlflowClient(tracking_uri=uri)
    run_ = client.get_run(metrics["mlflow_run_id"])
    assert run_.info.status == "FINISHED"
    assert run_.data.params["model.mixer"] == "ssog" and run_.data.params["data.resolution"] == "16"
    # train.precision: auto, recorded as run: bfloat16 on CUDA and on CPUs with native bf16, else float32
    cpu = "bfloat16" if cpu_has_native_bf16() else "float32"
    assert run_.data.params["train.precision"] == ("bfloat16" if torch.cuda.is_available() else cpu)
    assert [m.step for m in client.get_metric_history(run_.info.run_id, "val_top1")] == [1, 2]
    # logged as a study trial is: constants as params, epoch as the step, did_not_train as a tag
    assert not {"epoch", "params", "flops_per_image", "did_not_train"} & set(run_.data.metrics)
    assert int(run_.data.params["params"]) == metrics["params"] and "flops_per_image" in run_.data.params
    assert run_.data.tags["vitscale.did_not_train"] in ("true", "false")
    assert [a.path for a in client.list_artifacts(run_.info.run_id, "checkpoint")] == [
        "checkpoint/checkpoint.pt"
    ]


def test_killed_run_resumes_in_the_same_mlflow_run(tmp_path):
    """SIGKILL `vitscale train` after its first checkpoint, then --resume: epochs 1..N once each."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    ckpt = tmp_path / "ckpt"
    args = [
        sys.executable,
        "-m",
        "vitscale",
        "train",
        "--mixer",
        "attention",
        "--width",
        "16",
        "--depth",
        "1",
        "--heads",
        "2",
        "--patch-size",
        "4",
        "--resolution",
        "32",
        "--batch-size",
        "32",
        "--epochs",
        "4",
        "--tracking-uri",
        uri,
        "--checkpoint-dir",
        str(ckpt),
        "--json",
    ]
    first = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 240
        while not (ckpt / "checkpoint.pt").exists() and time.time() < deadline and first.poll() is None:
            time.sleep(0.05)
    finally:
        first.kill()
        first.wait()
    assert (ckpt / "checkpoint.pt").exists()
    done = subprocess.run([*args, "--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    final = json.loads(done.stdout.strip().splitlines()[-1])
    run_id = (ckpt / "mlflow_run_id").read_text().strip()
    assert final["mlflow_run_id"] == run_id and final["epoch"] == 4
    client = MlflowClient(tracking_uri=uri)
    assert [m.step for m in client.get_metric_history(run_id, "val_loss")] == [1, 2, 3, 4]
    assert client.get_run(run_id).info.status == "FINISHED"


def test_resume_with_changed_flags_is_refused(capsys, tmp_path):
    ckpt = str(tmp_path / "ckpt")
    assert (
        run(capsys, "train", *TINY, "--epochs", "1", "--no-track", "--json", "--checkpoint-dir", ckpt)[0] == 0
    )
    code, _, err = run(
        capsys, "train", *TINY, "--epochs", "2", "--no-track", "--checkpoint-dir", ckpt, "--resume"
    )
    assert code == 2 and "train.epochs=1 (now 2)" in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--dataset", "cifar10", "--root", "/no/such/folder"], "/no/such/folder"),
        (["--dataset", "nope"], "dataset"),
        (["--heads", "3"], "heads"),
        (["--resolution", "18"], "patch"),
        (["--resume"], "--resume"),
        (["--epochs", "zero"], "--epochs"),
        (["--no-such-flag"], "--no-such-flag"),
        (["--precision", "float16"], "train.precision"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path, args, expected):
    code, _, err = run(capsys, "train", *TINY, "--epochs", "1", "--no-track", *args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and expected in lines[0], err
    assert "Traceback" not in err


@pytest.mark.parametrize("dataset", ["fashion_mnist", "cifar10"])
def test_data_that_does_not_load_leaves_no_mlflow_run(capsys, tmp_path, dataset):
    """The run starts once the data has loaded: a wrong --root is one line, exit 2, and no FAILED
    run in the store (nor an experiment made for it)."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    missing = str(tmp_path / "nonexistent")
    code, _, err = run(capsys, "train", "--dataset", dataset, "--root", missing, "--tracking-uri", uri)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and missing in lines[0], err
    client = MlflowClient(tracking_uri=uri)
    experiments = client.search_experiments()
    assert [e.name for e in experiments] == ["Default"]
    assert client.search_runs([e.experiment_id for e in experiments]) == []


def test_existing_checkpoint_is_not_overwritten_without_resume(capsys, tmp_path):
    ckpt = tmp_path / "ckpt"
    assert (
        run(capsys, "train", *TINY, "--epochs", "1", "--no-track", "--json", "--checkpoint-dir", str(ckpt))[0]
        == 0
    )
    before = (ckpt / "checkpoint.pt").read_bytes()
    code, _, err = run(capsys, "train", *TINY, "--epochs", "1", "--no-track", "--checkpoint-dir", str(ckpt))
    assert code == 2 and "--resume" in err
    assert (ckpt / "checkpoint.pt").read_bytes() == before


def test_bf16_run_records_its_precision_and_reruns_from_it(capsys, tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = [
        "--epochs",
        "1",
        "--precision",
        "bfloat16",
        "--set",
        "data.num_train=256",
        "--set",
        "train.threads=1",
    ]
    code, out, err = run(capsys, "train", *TINY, *args, "--json", "--tracking-uri", uri)
    assert code == 0, err
    first = json.loads(out.strip().splitlines()[-1])
    params = MlflowClient(tracking_uri=uri).get_run(first["mlflow_run_id"]).data.params
    assert params["train.precision"] == "bfloat16"
    code, out, err = run(
        capsys, "train", "--from-run", first["mlflow_run_id"], "--tracking-uri", uri, "--json"
    )
    assert code == 0, err
    again = json.loads(out.strip().splitlines()[-1])
    assert again["val_loss"] == first["val_loss"] and again["train_loss"] == first["train_loss"]
