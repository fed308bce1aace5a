"""A tiny MLflow store of a training study that can carry the compute-optimal analysis: 2 mixers x
6 widths x 3 epoch counts x 2 seeds (discrete regime), test error drawn from a known
E + A/N^α + B/D^β, every epoch logging the cumulative `images_seen` and `train_flops` the trainer
logs. One SSoG run logs no compute (an older trainer: D falls back to data.num_train x train.epochs, C to
3 x flops_per_image x D); one run failed. SSoG in a second regime (ode) has 3 sizes at one data level: refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from analysis_stores import _log_run, _parent

from vitscale.tracking import layout

COMPUTE_STUDY = "tiny_compute"
WIDTHS = (16, 24, 32, 48, 64, 96)
EPOCHS = (1, 3, 9)
SEEDS = (0, 1)
NUM_TRAIN = 2000
TEST_IMAGES = 400  # test top-1 is a whole number of images
LAWS = {"attention": (0.04, 8.4, 2.0, 0.35, 0.3), "ssog": (0.03, 8.4, 2.0, 0.35, 0.3)}  # ssog 1 point better
FALLBACK_RUN = ("ssog", 32, 3, 1)  # logs no images_seen / train_flops
FAILED_RUN = ("attention", 96, 9, 1)


def params_of(width: int) -> float:
    return 12.0 * width**2 * 4 + 5000


def flops_per_image(width: int) -> float:
    return 2.0 * params_of(width) * 64


def _trial(regime: str, mixer: str, width: int, epochs: int, seed: int, rng) -> dict:
    e, a, b, alpha, beta = LAWS[mixer]
    n, d = params_of(width), float(NUM_TRAIN * epochs)
    err = (e + a * n**-alpha + b * d**-beta) * np.exp(rng.normal(0, 0.02))
    top1 = round((1 - err) * TEST_IMAGES) / TEST_IMAGES
    per_epoch = [
        {
            "epoch": k,
            "val_top1": top1 - 0.01 * (epochs - 1 - k),
            "images_seen": NUM_TRAIN * (k + 1),
            "train_flops": 3 * flops_per_image(width) * NUM_TRAIN * (k + 1),
        }
        for k in range(epochs)
    ]
    if (mixer, width, epochs, seed) == FALLBACK_RUN:
        per_epoch = [
            {k: v for k, v in m.items() if k not in ("images_seen", "train_flops")} for m in per_epoch
        ]
    return {
        "params": {
            "model.mixer": mixer,
            "model.regime": regime,
            "model.width": width,
            "model.depth": 4,
            "model.patch_size": 4,
            "data.dataset": "digits",
            "data.resolution": 16,
            "data.num_train": NUM_TRAIN,
            "train.epochs": epochs,
            "train.seed": seed,
        },
        "epochs": per_epoch,
        "final": {"params": n, "flops_per_image": flops_per_image(width), "test_top1": top1},
    }


def write_compute_study(uri: str, artifacts: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(COMPUTE_STUDY, artifact_location=artifacts.as_uri())
    parent = _parent(client, exp, COMPUTE_STUDY, "train")
    rng, n = np.random.default_rng(7), 0
    grid = [("discrete", m, w, EPOCHS) for m in LAWS for w in WIDTHS]
    grid += [("ode", "ssog", w, EPOCHS[:1]) for w in WIDTHS[:3]]
    for regime, mixer, width, epoch_counts in grid:
        for epochs in epoch_counts:
            for seed in SEEDS:
                n += 1
                t = _trial(regime, mixer, width, epochs, seed, rng)
                failed = (mixer, width, epochs, seed) == FAILED_RUN and regime == "discrete"
                tags = {
                    layout.STUDY: COMPUTE_STUDY,
                    layout.KIND: "train",
                    layout.TRIAL_ID: f"k_{n:04d}",
                    layout.STATUS: "FAILED" if failed else "FINISHED",
                    layout.FAILURE_REASON: "diverged" if failed else "",
                    layout.STOPPED_EARLY: "false",
                }
                final = {k: v for k, v in t["final"].items() if not (failed and k == "test_top1")}
                status = "FAILED" if failed else "FINISHED"
                _log_run(client, exp, parent, tags, t["params"], t["epochs"], final, status=status)
