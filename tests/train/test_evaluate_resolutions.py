"""Resolution as an accuracy axis: `vitscale evaluate` on a finished run, `train.eval_resolutions`
inside a trial, `data.train_resolutions` (training across resolutions, exact on resume)."""

from __future__ import annotations

import contextlib
import json

import pytest
import torch
from mlflow import MlflowClient
from pydantic import ValidationError
from test_train_cli import TINY, run  # the one-second `vitscale train` flags and the CLI runner

from vitscale import data as vdata
from vitscale.cli import main
from vitscale.tracking import store
from vitscale.tracking.predictions import read_predictions
from vitscale.train import fit
from vitscale.train.metrics import SELECTABLE_METRICS
from vitscale.validation import error_lines


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


def test_an_older_checkpoint_reads_its_data_from_the_run_or_trial_json(capsys, trained):
    """Checkpoints written before they carried the trial config: the run's data.* / train.* params
    (what studies logged), or the trial.json `vitscale train` writes beside a checkpoint."""
    state = torch.load(trained["folder"] / "ckpt" / "checkpoint.pt", weights_only=True)
    del state["trial_config"]
    old = trained["folder"] / "old"
    old.mkdir()
    torch.save(state, old / "checkpoint.pt")
    code, _, err = run(capsys, "evaluate", str(old), "--resolutions", "16")
    assert code == 2 and "does not say what data it was trained on" in err and len(err.splitlines()) == 1
    (old / "trial.json").write_text((trained["folder"] / "ckpt" / "trial.json").read_text())
    code, out, err = run(capsys, "evaluate", str(old), "--resolutions", "16", "--json")
    assert code == 0 and json.loads(out)["test_top1"] == trained["with"]["test_top1"], err
    (old / "trial.json").unlink()

    client = MlflowClient(tracking_uri=trained["uri"])
    original = client.get_run(trained["with"]["mlflow_run_id"])
    run_id = client.create_run(original.info.experiment_id).info.run_id
    store.log_params(client, run_id, original.data.params)
    client.log_artifact(run_id, str(old / "checkpoint.pt"), artifact_path="checkpoint")
    code, out, err = run(
        capsys, "evaluate", run_id, "--resolutions", "16", "--json", "--tracking-uri", trained["uri"]
    )
    assert code == 0 and json.loads(out)["test_top1"] == trained["with"]["test_top1"], err


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


def test_eval_resolutions_in_a_trial_add_metrics_and_predictions(tiny_trial, tmp_path):
    """At the end of a finished trial: val and test at each resolution, beside the checkpoint
    (what the study callback ships), counted as the metrics counted."""
    result = fit(tiny_trial(train={"epochs": 1, "eval_resolutions": [8, 24]}), checkpoint_dir=tmp_path)
    metrics = result.metrics
    assert {
        f"{s}_{m}_at{r}" for s in ("val", "test") for m in ("loss", "top1", "top5") for r in (8, 24)
    } <= set(metrics)
    assert "val_top1_at8" not in SELECTABLE_METRICS
    for name in ("val@8", "test@8", "val@24", "test@24", "val", "test"):
        assert (tmp_path / "predictions" / f"{name}.parquet").is_file()
    table = read_predictions(tmp_path / "predictions" / "test@24.parquet")
    assert table.column("correct").to_numpy().mean() == pytest.approx(metrics["test_top1_at24"], abs=1e-6)
    assert result.history[0] == metrics  # one report holds them: the Tune callback logs them as any metric


def test_eval_resolutions_at_the_trained_side_repeat_its_metrics(tiny_trial):
    metrics = fit(tiny_trial(train={"epochs": 1, "eval_resolutions": [16]})).metrics
    assert (
        metrics["test_top1_at16"] == metrics["test_top1"] and metrics["val_loss_at16"] == metrics["val_loss"]
    )


@pytest.mark.parametrize(
    ("section", "values", "key"),
    [
        (
            "train",
            {"eval_resolutions": [16, 18]},
            "train.eval_resolutions: 18 is not divisible by model.patch_size 4",
        ),
        ("data", {"train_resolutions": [12, 30, 14]}, "data.train_resolutions: 30, 14 are not divisible"),
        ("data", {"train_resolutions": []}, "data.train_resolutions"),
    ],
)
def test_resolution_lists_must_fit_the_patch_size(tiny_trial, section, values, key):
    with pytest.raises(ValidationError) as info:
        tiny_trial(**{section: values})
    assert any(line.startswith(key) for line in error_lines(info.value)), error_lines(info.value)


def test_train_resolutions_draw_one_side_per_batch_from_the_generator(tiny_trial):
    config = tiny_trial(data={"train_resolutions": [8, 16, 24]})
    bundle = vdata.load(config.data, torch.device("cpu"))
    sides = [
        [
            images.shape[-1]
            for images, _ in vdata.train_batches(bundle, config.data, 16, vdata.make_generator(bundle, 3))
        ]
        for _ in range(2)
    ]
    assert sides[0] == sides[1] and set(sides[0]) == {8, 16, 24}
    plain = [
        b[0].shape[-1]
        for b in vdata.train_batches(bundle, tiny_trial().data, 16, vdata.make_generator(bundle, 3))
    ]
    assert set(plain) == {16}


def test_a_single_training_side_trains_exactly_as_no_list(tiny_trial):
    """[16] at resolution 16 draws nothing: the same batches (and so the same run) as no list, so
    an arm "trained at 28" of a resolution study repeats the run of a study without the key."""
    bundle = vdata.load(tiny_trial().data, torch.device("cpu"))

    def batches(config):  # two epochs from one generator: a draw in the first shifts the second
        generator = vdata.make_generator(bundle, 3)
        return [b for _ in range(2) for b in vdata.train_batches(bundle, config.data, 16, generator)]

    single, plain = batches(tiny_trial(data={"train_resolutions": [16]})), batches(tiny_trial())
    assert len(single) == len(plain)
    assert all(
        torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(single, plain, strict=True)
    )


def test_train_resolutions_train_deterministically_and_resume_bit_for_bit(tiny_trial, tmp_path):
    config = tiny_trial(data={"train_resolutions": [8, 24]})
    straight = fit(config).history
    assert _steady(fit(config).history) == _steady(straight)
    assert _steady(fit(tiny_trial()).history) != _steady(straight)  # the draws change training

    def stop_after_two(metrics, _dir):
        if metrics["epoch"] == 2:
            raise Stop

    with pytest.raises(Stop):
        fit(config, report=stop_after_two, checkpoint_dir=tmp_path)
    assert _steady(fit(config, checkpoint_dir=tmp_path).history) == _steady(straight)


class Stop(Exception):
    pass


def _steady(history: list[dict[str, float]]) -> list[dict[str, float]]:
    """Every metric but the timings and memory (which differ between runs by nature)."""
    timing = ("epoch_seconds", "train_images_per_second", "peak_memory_mb")
    return [{k: v for k, v in m.items() if k not in timing} for m in history]
