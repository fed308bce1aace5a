"""Resolution as an accuracy axis: `vitscale evaluate` on a finished run, `train.eval_resolutions`
inside a trial, `data.train_resolutions` (training across resolutions, exact on resume)."""

from __future__ import annotations

import contextlib
import json

import pytest
from mlflow import MlflowClient
from test_train_cli import TINY, run  # the one-second `vitscale train` flags and the CLI runner

from vitscale.cli import main
from vitscale.tracking.predictions import read_predictions


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tracked `vitscale train` run (digits 16 px, one epoch) that logged its checkpoint; and
    one without a checkpoint. Module-scoped: training is the slow part."""
    folder = tmp_path_factory.mktemp("evaluate")
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    runs = {}
    for name, extra in (("with", ["--checkpoint-dir", str(folder / "ckpt")]), ("without", [])):
        out = folder / f"{name}.json"
        code = _main_to_file(["train", *TINY, "--epochs", "1", "--json", "--tracking-uri", uri, *extra], out)
        assert code == 0
        runs[name] = json.loads(out.read_text().strip().splitlines()[-1])
    return {"uri": uri, "folder": folder, **runs}


def _main_to_file(argv: list[str], path) -> int:
    """`main(argv)` with stdout into `path` (capsys is function-scoped); its exit code."""
    with path.open("w") as f, contextlib.redirect_stdout(f):
        try:
            main(argv)
        except SystemExit as exc:
            return exc.code or 0
    return 0


def test_evaluate_at_the_trained_resolution_reproduces_the_logged_metrics(capsys, trained):
    run_id, uri = trained["with"]["mlflow_run_id"], trained["uri"]
    code, out, err = run(
        capsys, "evaluate", run_id, "--resolutions", "16,24,32", "--json", "--tracking-uri", uri
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.strip().splitlines()]
    assert [r["resolution"] for r in rows] == [16, 24, 32] and [r["tokens"] for r in rows] == [16, 36, 64]
    for split in ("val", "test"):
        assert (
            rows[0][f"{split}_top1"] == trained["with"][f"{split}_top1"]
        )  # exactly: same model, same images
        assert rows[0][f"{split}_loss"] == pytest.approx(trained["with"][f"{split}_loss"], rel=1e-6)
    client = MlflowClient(tracking_uri=uri)
    metrics = client.get_run(run_id).data.metrics
    assert metrics["test_top1_at16"] == metrics["test_top1"]
    assert {f"{s}_top1_at{r}" for s in ("val", "test") for r in (16, 24, 32)} <= set(metrics)
    history = client.get_metric_history(run_id, "test_top1_at32")
    assert [m.step for m in history] == [1]  # the last epoch's step
    names = {a.path for a in client.list_artifacts(run_id, "predictions")}
    assert {"predictions/test.parquet", "predictions/test@24.parquet", "predictions/val@32.parquet"} <= names
    local = client.download_artifacts(run_id, "predictions/test@24.parquet", str(trained["folder"]))
    assert read_predictions(local).column("correct").to_numpy().mean() == pytest.approx(rows[1]["test_top1"])


def test_evaluate_a_local_checkpoint_writes_predictions_beside_it(capsys, trained):
    ckpt = trained["folder"] / "ckpt"
    code, out, err = run(
        capsys, "evaluate", str(ckpt / "checkpoint.pt"), "--resolutions", "16", "--split", "test"
    )
    assert code == 0, err
    assert "test_top1" in out and "val_top1" not in out
    assert (ckpt / "predictions" / "test@16.parquet").is_file()
    assert not (ckpt / "predictions" / "val@16.parquet").exists()


@pytest.mark.parametrize(
    ("case", "resolutions", "expected"),
    [
        ("unknown", "16", "no MLflow run 0123456789abcdef0123456789abcdef"),
        ("not_an_id", "16", "neither a checkpoint file or folder nor an MLflow run id"),
        ("without", "16", "tracking.checkpoints: all"),
        ("with", "18", "18 is not divisible by the model's patch size 4"),
        ("with", "16,x", "--resolutions: '16,x' is not a comma list"),
        ("with", "", "--resolutions"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, trained, case, resolutions, expected):
    source = {"unknown": "0123456789abcdef0123456789abcdef", "not_an_id": "no-such-run"}.get(case)
    source = source or trained[case]["mlflow_run_id"]
    code, _, err = run(
        capsys, "evaluate", source, "--resolutions", resolutions, "--tracking-uri", trained["uri"]
    )
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert "Traceback" not in err
