"""A tiny MLflow store of accuracy at resolution: a comparison study whose final runs were evaluated
at 16, 24 and 32 px (`test_top1_at<R>`, `predictions/test@R.parquet`), and the benchmark study of
the same model shape that `analysis.throughput_from` names.

Arms: mixer (attention, ssog) x training sides ([16], [16, 24, 32]); 3 seeds. Accuracy falls away
from 16 px for the single-side arms and stays up for the multi-side ones; ssog is 2 points below
attention at 16 px. Throughput: ssog faster, both slower with more tokens."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
from analysis_stores import _log_run, image_correctness

from vitscale.tracking import layout
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT, predictions_path, write_predictions

RESOLUTION_STUDY = "tiny_resolution"
RESOLUTION_BENCH = "tiny_resolution_bench"
SIDES = (16, 24, 32)
SEEDS = (100, 101, 102)
TEST_IMAGES = 800
TRAINED = {"single": [16], "multi": [16, 24, 32]}


def truth(mixer: str, trained: str, side: int) -> float:
    base = 0.80 - (0.02 if mixer == "ssog" else 0.0)
    drop = 0.01 if trained == "multi" else 0.08
    return base - drop * abs(side - 16) / 8


def bench_images_per_second(mixer: str, side: int) -> float:
    tokens = (side // 4) ** 2
    return 1e5 / (tokens**1.5 if mixer == "ssog" else 1.3 * tokens**2)


def _log_predictions(client, run_id: str, per_side: dict[str, float], rng) -> None:
    difficulty = np.random.default_rng(TEST_IMAGES).normal(0, 1, TEST_IMAGES)
    with tempfile.TemporaryDirectory() as tmp:
        for name, top1 in per_side.items():
            split, _, side = name.partition("@")
            correct = image_correctness(rng, difficulty, top1)
            label = np.arange(TEST_IMAGES) % 10
            predicted = np.where(correct, label, (label + 1) % 10)
            path = write_predictions(
                Path(tmp) / predictions_path(split, int(side) if side else None),
                np.arange(TEST_IMAGES),
                label,
                predicted,
            )
            client.log_artifact(run_id, str(path), PREDICTIONS_ARTIFACT)


def write_resolution_study(uri: str, artifacts: Path) -> dict:
    """The study's runs; returns {(arm tag, side): {seed: logged test top-1}} for the tests."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(RESOLUTION_STUDY, artifact_location=artifacts.as_uri())
    parent = client.create_run(
        exp,
        tags={
            layout.ROLE: "study",
            layout.STUDY: RESOLUTION_STUDY,
            layout.KIND: "comparison",
            layout.REFERENCE: json.dumps({"model.mixer": "attention"}),
        },
    ).info.run_id
    spec = {"name": RESOLUTION_STUDY, "analysis": {"throughput_from": RESOLUTION_BENCH}}
    client.log_text(parent, json.dumps(spec), "spec.yaml")
    rng = np.random.default_rng(3)
    logged: dict = {}
    n = 0
    for mixer in ("attention", "ssog"):
        for trained, sides in TRAINED.items():
            arm = layout.arm_key({"model.mixer": mixer, "data.train_resolutions": sides})
            for seed in SEEDS:
                n += 1
                shift = 0.01 * (seed - 100)  # shared by the arms of a seed
                metrics = {"params": 50_000.0}
                per_side = {}
                for side in SIDES:
                    top1 = round((truth(mixer, trained, side) + shift + rng.normal(0, 0.003)) * TEST_IMAGES)
                    top1 /= TEST_IMAGES
                    metrics[f"test_top1_at{side}"] = top1
                    metrics[f"val_top1_at{side}"] = top1 + 0.005
                    per_side[f"test@{side}"] = top1
                    logged.setdefault((arm, side), {})[seed] = top1
                metrics["test_top1"], metrics["val_top1"] = (
                    metrics["test_top1_at16"],
                    metrics["val_top1_at16"],
                )
                params = {
                    "model.mixer": mixer,
                    "model.regime": "discrete",
                    "model.width": 64,
                    "model.depth": 4,
                    "model.patch_size": 4,
                    "model.attention.backend": "sdpa",
                    "data.dataset": "digits",
                    "data.resolution": 16,
                    "data.train_resolutions": sides if trained == "multi" else [16],
                    "train.seed": seed,
                    "train.eval_resolutions": list(SIDES),
                }
                tags = {
                    layout.STUDY: RESOLUTION_STUDY,
                    layout.KIND: "comparison",
                    layout.TRIAL_ID: f"r_{n:03d}",
                    layout.STATUS: "FINISHED",
                    layout.STOPPED_EARLY: "false",
                    layout.PHASE: "final",
                    layout.ARM: arm,
                }
                run_id = _log_run(client, exp, parent, tags, params, [], metrics)
                _log_predictions(client, run_id, per_side, rng)
    return logged


def write_resolution_bench(uri: str, artifacts: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(RESOLUTION_BENCH, artifact_location=artifacts.as_uri())
    parent = client.create_run(
        exp, tags={layout.ROLE: "study", layout.STUDY: RESOLUTION_BENCH, layout.KIND: "benchmark"}
    ).info.run_id
    n = 0
    for mixer in ("attention", "ssog"):
        for side in SIDES:
            n += 1
            params = {
                "model.mixer": mixer,
                "model.regime": "discrete",
                "model.image_size": side,
                "model.attention.backend": "sdpa",
                "model.width": 64,
                "model.depth": 4,
                "model.patch_size": 4,
                "bench.mode": "inference",
            }
            tags = {
                layout.STUDY: RESOLUTION_BENCH,
                layout.KIND: "benchmark",
                layout.TRIAL_ID: f"rb_{n:03d}",
                layout.STATUS: "FINISHED",
                layout.STOPPED_EARLY: "false",
            }
            metrics = {"images_per_second": bench_images_per_second(mixer, side)}
            _log_run(client, exp, parent, tags, params, [], metrics)
