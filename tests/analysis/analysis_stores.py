"""Tiny MLflow stores written in the tracking layout (vitscale.tracking.layout) the writers use.

Training study: 2 mixers x 2 regimes x 3 widths x 2 seeds, one FAILED trial, one stopped early,
and a resumed second parent run that re-ran one trial (the newest run of that trial must win).
Benchmark study: attention (sdpa, math) and ssog x 2 regimes x 4 resolutions, one `oom`.
Comparison study: arms mixer x regime, tune and final phases, a reference tag and a spec.yaml;
the discrete arms' final runs log per-image predictions and a test curve (the ODE arms' do not,
like older runs); every run logs its learning curve per epoch, and ssog · ode is still improving.
Also `fake_run`: an in-memory stand-in for mlflow's Run, for tests that need no store.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.errors import OUT_OF_MEMORY
from vitscale.tracking import layout
from vitscale.tracking.predictions import PREDICTIONS_ARTIFACT, predictions_path, write_predictions

TRAIN_STUDY = "tiny_train"
COMPARISON_STUDY = "tiny_comparison"
BENCH_STUDY = "tiny_bench"
WIDTHS = (32, 64, 96)


def _log_run(
    client, exp_id, parent_id, tags, params, metrics_by_epoch, final, status="FINISHED", first_step=0
):
    from mlflow.entities import Metric, Param, RunTag

    run = client.create_run(exp_id, tags={layout.PARENT_RUN_ID: parent_id, layout.ROLE: "trial", **tags})
    now = int(time.time() * 1000)
    metrics = [
        Metric(k, float(v), now, step)
        for step, epoch in enumerate(metrics_by_epoch, start=first_step)
        for k, v in epoch.items()
    ]
    metrics += [Metric(k, float(v), now, 0) for k, v in final.items()]
    client.log_batch(
        run.info.run_id,
        metrics=metrics,
        params=[Param(k, str(v)) for k, v in params.items()],
        tags=[RunTag(k, str(v)) for k, v in tags.items()],
    )
    client.set_terminated(run.info.run_id, status=status)
    return run.info.run_id


def _parent(client, exp_id, study, kind):
    run = client.create_run(exp_id, tags={layout.ROLE: "study", layout.STUDY: study, layout.KIND: kind})
    return run.info.run_id


def train_truth(mixer: str, width: int) -> tuple[float, float]:
    """(params, expected top-1): ssog ~12 % smaller and ~3 points better, error = a·P^-b + c."""
    params = 12.0 * width**2 * 4 * (0.88 if mixer == "ssog" else 1.0) + 5000
    top1 = 1.0 - (8.0 * params**-0.3 + 0.05) + (0.03 if mixer == "ssog" else 0.0)
    return params, top1


def write_train_study(uri: str, artifacts: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(TRAIN_STUDY, artifact_location=artifacts.as_uri())
    first = _parent(client, exp, TRAIN_STUDY, "train")
    rng = np.random.default_rng(0)
    n = 0
    for regime in ("discrete", "ode"):
        for mixer in ("attention", "ssog"):
            for width in WIDTHS:
                for seed in (0, 1):
                    n += 1
                    params, top1 = train_truth(mixer, width)
                    top1 += rng.normal(0, 0.004)
                    status, early, reason = "FINISHED", "false", ""
                    if (mixer, regime, width, seed) == ("ssog", "ode", 32, 1):
                        status, reason = "FAILED", "diverged"
                    if (mixer, regime, width, seed) == ("attention", "discrete", 96, 1):
                        early, top1 = "true", top1 - 0.2
                    cfg = {
                        "model.mixer": mixer,
                        "model.regime": regime,
                        "model.width": width,
                        "model.depth": 4,
                        "model.patch_size": 4,
                        "model.ssog.num_gaussians": 4,
                        "model.attention.backend": "sdpa",
                        "model.ode.step_size": None,
                        "model.ssog.offsets": True,
                        "data.resolution": 32,
                        "train.seed": seed,
                        "train.lr": 0.001,
                    }
                    tags = {
                        layout.STUDY: TRAIN_STUDY,
                        layout.KIND: "train",
                        layout.TRIAL_ID: f"t_{n:05d}",
                        layout.STATUS: status,
                        layout.FAILURE_REASON: reason,
                        layout.STOPPED_EARLY: early,
                        layout.NODE_ID: "node-a",
                        layout.CONFIG_KEY: f"{mixer}-{regime}-{width}",
                    }
                    epochs = [{"epoch": 0, "val_top1": top1 - 0.1, "val_loss": 2.0}]
                    if status == "FINISHED":
                        epochs.append(
                            {
                                "epoch": 1,
                                "val_top1": top1,
                                "val_loss": 1.0,
                                "val_top5": min(1, top1 + 0.2),
                                "train_images_per_second": 1000.0 / width,
                            }
                        )
                        if regime == "ode":
                            epochs[-1]["nfe_mean"] = 10.0 + width / 16 + (2 if mixer == "attention" else 0)
                    static = {"params": params, "flops_per_image": 2.0 * params * 64}
                    _log_run(
                        client,
                        exp,
                        first,
                        tags,
                        cfg,
                        epochs,
                        static,
                        status="FAILED" if status == "FAILED" else "FINISHED",
                    )
    # The driver died and the study was resumed: trial t_00001 ran again under a second parent.
    time.sleep(0.01)
    second = _parent(client, exp, TRAIN_STUDY, "train")
    params, top1 = train_truth("attention", 32)
    cfg = {
        "model.mixer": "attention",
        "model.regime": "discrete",
        "model.width": 32,
        "model.depth": 4,
        "model.patch_size": 4,
        "model.ssog.num_gaussians": 4,
        "model.attention.backend": "sdpa",
        "model.ode.step_size": None,
        "model.ssog.offsets": True,
        "data.resolution": 32,
        "train.seed": 0,
        "train.lr": 0.001,
    }
    tags = {
        layout.STUDY: TRAIN_STUDY,
        layout.KIND: "train",
        layout.TRIAL_ID: "t_00001",
        layout.STATUS: "FINISHED",
        layout.STOPPED_EARLY: "false",
        layout.NODE_ID: "node-b",
        layout.CONFIG_KEY: "attention-discrete-32",
    }
    _log_run(
        client,
        exp,
        second,
        tags,
        cfg,
        [{"epoch": 1, "val_top1": top1 + 0.001, "val_loss": 1.0}],
        {"params": params, "flops_per_image": 2.0 * params * 64},
    )


def bench_truth(mixer: str, backend: str, regime: str, res: int) -> tuple[float, float]:
    """(images/s, peak MB): attention time ~ N^2, ssog ~ N^1.5 with a bigger constant, so they cross."""
    tokens = (res / 16) ** 2
    reg = 3.0 if regime == "ode" else 1.0
    if mixer == "attention":
        t = reg * (2e-6 * tokens + (4e-9 if backend == "sdpa" else 8e-9) * tokens**2)
        mem = 100 + (0.002 if backend == "sdpa" else 0.02) * tokens**2 / 100 + 0.01 * tokens
    else:
        t = reg * (2e-6 * tokens + 6e-8 * tokens**1.5)
        mem = 100 + 0.05 * tokens
    return 1.0 / t, mem


def write_bench_study(uri: str, artifacts: Path) -> None:
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(BENCH_STUDY, artifact_location=artifacts.as_uri())
    parent = _parent(client, exp, BENCH_STUDY, "benchmark")
    n = 0
    for regime in ("discrete", "ode"):
        for mixer, backend in (("attention", "sdpa"), ("attention", "math"), ("ssog", "sdpa")):
            for res in (224, 384, 512, 768):
                n += 1
                ips, mem = bench_truth(mixer, backend, regime, res)
                params = {
                    "model.mixer": mixer,
                    "model.regime": regime,
                    "model.image_size": res,
                    "model.attention.backend": backend,
                    "bench.batch_size": 8,
                    "bench.mode": "inference",
                    "bench.dtype": "float32",
                    "bench.device": "cpu",
                    "bench.compile": False,
                    "model.width": 192,
                    "model.depth": 12,
                    "model.heads": 3,
                    "model.patch_size": 16,
                    "model.ssog.num_gaussians": 4,
                }
                oom = (mixer, backend, regime, res) == ("attention", "math", "ode", 768)
                tags = {
                    layout.STUDY: BENCH_STUDY,
                    layout.KIND: "benchmark",
                    layout.TRIAL_ID: f"b_{n:03d}",
                    layout.STATUS: "FAILED" if oom else "FINISHED",
                    layout.FAILURE_REASON: OUT_OF_MEMORY if oom else "",
                    layout.STOPPED_EARLY: "false",
                    layout.NODE_ID: "node-a",
                }
                tokens = (res // 16) ** 2
                metrics = {
                    "tokens": tokens,
                    "params": 5e6,
                    "flops_per_image": 1e3 * tokens**1.5 if mixer == "ssog" else 1e2 * tokens**2,
                    "nfe": 8 if regime == "ode" else 0,
                }
                if not oom:  # repeats within 0.2 % of their median: ratios beyond the 1 % floor count
                    metrics.update(
                        images_per_second=ips,
                        latency_ms=8000.0 / ips,
                        peak_memory_mb=mem,
                        latency_spread=0.002,
                    )
                _log_run(
                    client, exp, parent, tags, params, [], metrics, status="FAILED" if oom else "FINISHED"
                )


def fake_run(run_id: str, trial: str, start: int, params: dict, metrics: dict, **tags) -> SimpleNamespace:
    """Just the attributes of mlflow.entities.Run that the reader uses."""
    all_tags = {
        layout.TRIAL_ID: trial,
        layout.STATUS: "FINISHED",
        layout.STOPPED_EARLY: "false",
        layout.PARENT_RUN_ID: "p1",
        layout.KIND: "train",
        **tags,
    }
    return SimpleNamespace(
        info=SimpleNamespace(run_id=run_id, start_time=start, end_time=start + 1, status="FINISHED"),
        data=SimpleNamespace(tags=all_tags, params={k: str(v) for k, v in params.items()}, metrics=metrics),
    )


def fake_bench_runs(throughput: dict, resolutions: tuple, params: dict, metrics) -> list[SimpleNamespace]:
    """Benchmark runs, one per (mixer, backend) x resolution of `throughput` (images/s per
    resolution): discrete, on the CPU, seed 0, with `params` and `metrics(mixer, res, ips)`."""
    runs = []
    for (mixer, backend), values in throughput.items():
        for res, ips in zip(resolutions, values, strict=True):
            n = len(runs) + 1
            run_params = {
                "model.mixer": mixer,
                "model.regime": "discrete",
                "model.image_size": res,
                "model.attention.backend": backend or "sdpa",
                "bench.device": "cpu",
                "bench.seed": 0,
                **params,
            }
            runs.append(
                fake_run(
                    f"b{n:02d}",
                    f"t{n:02d}",
                    n,
                    run_params,
                    metrics(mixer, res, ips),
                    **{layout.KIND: "benchmark"},
                )
            )
    return runs


def analyze_fake_bench(root: Path, study: str, runs: list) -> tuple:
    """(analysis result, report text) of `runs` analysed as a benchmark study from a snapshot."""
    table = runs_to_table(runs, study)
    snap = write_snapshot(StudyRuns(study, "benchmark", table, ["p1"]), root / "in" / "runs.parquet")
    res = analyze(study, out=root / "out", from_parquet=snap)
    return res, res.report_path.read_text()


COMPARISON_SPACE = {
    "train.lr": {"loguniform": [1.0e-4, 1.0e-2]},
    "model.ssog.num_gaussians": {"int": [1, 8], "when": {"model.mixer": "ssog"}},
    "model.mixer": {"choice": ["attention", "ssog"]},
    "model.regime": {"choice": ["discrete", "ode"]},
}
COMPARISON_REFERENCE = {"model.mixer": "attention"}
COMPARISON_FIDELITY = {"data.num_train": 100, "train.epochs": 1}
# ssog · discrete tuned at COMPARISON_FIDELITY, its top 3 points confirmed at full fidelity (as
# tune.confirmation records it): full fidelity reverses the first two, so the choice changed.
COMPARISON_CONFIRMATION = {
    "model.mixer=ssog,model.regime=discrete": {
        "top_k": 3,
        "confirmed": 3,
        "seed": 0,
        "metric": "val_top1",
        "mode": "max",
        "fidelity": COMPARISON_FIDELITY,
        "points": [
            {"point": {"train.lr": 3e-3}, "sample": 5, "low_rank": 1, "low_score": 0.78, "full_score": 0.83,
             "chosen": False},
            {"point": {"train.lr": 1e-2}, "sample": 2, "low_rank": 2, "low_score": 0.77, "full_score": 0.85,
             "chosen": True},
            {"point": {"train.lr": 1e-3}, "sample": 0, "low_rank": 3, "low_score": 0.70, "full_score": None,
             "chosen": False},
        ],
        "rho": None,
        "n": 2,
        "rho_note": "n = 2 < 3",
        "low_fidelity_point": {"train.lr": 3e-3},
        "low_fidelity_score": 0.78,
        "changed": True,
        "note": "1 of 3 confirmation runs did not qualify (failed or short)",
    }
}  # fmt: skip
TUNED_LR = {
    ("attention", "discrete"): 1e-3,
    ("ssog", "discrete"): 1e-2,
    ("attention", "ode"): 2e-3,
    ("ssog", "ode"): 3e-3,
}
COMPARISON_GAIN = {"discrete": 0.03, "ode": -0.01}  # ssog - attention per regime, before noise
PREDICTION_IMAGES = {"val": 600, "test": 1000}
PREDICTING_REGIMES = ("discrete",)  # the ODE arms' runs have no predictions (older runs)


def image_correctness(rng: np.random.Generator, difficulty: np.ndarray, top1: float) -> np.ndarray:
    """round(top1 · N) images right: the easiest by a shared latent difficulty plus run noise, so
    two runs on the same images are correlated as real models are."""
    k = int(round(top1 * difficulty.size))
    order = np.argsort(difficulty + rng.normal(0, 0.7, difficulty.size), kind="stable")
    correct = np.zeros(difficulty.size, dtype=bool)
    correct[order[:k]] = True
    return correct


def log_predictions(client, run_id: str, metrics: dict, rng: np.random.Generator) -> None:
    """predictions/{val,test}.parquet for a run whose val_top1 / test_top1 they reproduce; images
    are listed in a shuffled order (the reader sorts by index)."""
    with tempfile.TemporaryDirectory() as tmp:
        for split, n in PREDICTION_IMAGES.items():
            difficulty = np.random.default_rng(n).normal(0, 1, n)  # the split's images: the same per run
            correct = image_correctness(rng, difficulty, metrics[f"{split}_top1"])
            label = np.arange(n) % 10
            predicted = np.where(correct, label, (label + 1) % 10)
            order = rng.permutation(n)
            path = write_predictions(
                Path(tmp) / predictions_path(split), order, label[order], predicted[order]
            )
            client.log_artifact(run_id, str(path), PREDICTIONS_ARTIFACT)


COMPARISON_EPOCHS = 8
IMAGES_PER_EPOCH = 1600
STILL_IMPROVING_ARM = ("ssog", "ode")  # its validation curve still rises ~2.4 points over the last quarter
TEST_CURVE_REGIMES = ("discrete",)  # their final runs log curve_test_top1; the ODE arms' (older) do not


def learning_curve(final_val: float, mixer: str, regime: str, phase: str) -> list[dict]:
    """Per epoch (step = epoch, from 1): images_seen, train_flops, val_top1 rising to `final_val` (a
    saturating curve; STILL_IMPROVING_ARM adds a slope of 1.2 points per epoch that has not levelled
    off), and for final runs of TEST_CURVE_REGIMES curve_test_top1 = val_top1 - 0.01."""
    slope = 0.012 if (mixer, regime) == STILL_IMPROVING_ARM else 0.0
    out = []
    for e in range(1, COMPARISON_EPOCHS + 1):
        rest = np.exp(-(e - 1)) - np.exp(-(COMPARISON_EPOCHS - 1))  # 0 at the last epoch
        val = final_val - 0.3 * rest - slope * (COMPARISON_EPOCHS - e)
        epoch = {
            "val_top1": val,
            "val_loss": 2.0 - val,
            "images_seen": IMAGES_PER_EPOCH * e,
            "train_flops": 3.0e6 * IMAGES_PER_EPOCH * e,
        }
        if phase == "final" and regime in TEST_CURVE_REGIMES:
            epoch[layout.CURVE_TEST_TOP1] = val - 0.01
        out.append(epoch)
    return out


def comparison_trials() -> list[dict]:
    """Arms mixer x regime: 4 tune-phase trials each (one failed, one stopped early in ssog·ode),
    then the tuned configuration over seeds 0-3 (final phase) with validation and test top-1 and
    per-epoch histories (`epochs`: learning_curve)."""
    rng = np.random.default_rng(5)
    out, n = [], 0
    for mixer in ("attention", "ssog"):
        for regime in ("discrete", "ode"):
            arm = f"model.mixer={mixer},model.regime={regime}"
            base = 0.80 + (COMPARISON_GAIN[regime] if mixer == "ssog" else 0.0)
            for phase, seeds in (("tune", [0, 0, 0, 0]), ("final", [0, 1, 2, 3])):
                for j, seed in enumerate(seeds):
                    n += 1
                    lr = TUNED_LR[(mixer, regime)] if phase == "final" else 10 ** (-4 + 0.6 * j)
                    status, early = "FINISHED", "false"
                    if phase == "tune" and (mixer, regime) == ("ssog", "ode"):
                        status, early = (
                            ("FAILED", "false"),
                            ("FINISHED", "true"),
                            (status, early),
                            (status, early),
                        )[j]
                    shift = 0.01 * seed + rng.normal(0, 0.002)  # seeds share their shift across arms
                    val = base + shift - (0.05 if phase == "tune" else 0.0)
                    metrics = {"val_top1": val, "params": 50_000.0}
                    if phase == "final":
                        metrics["test_top1"] = val - 0.01
                    out.append(
                        {
                            "trial": f"c_{n:03d}",
                            "status": status,
                            "tags": {layout.PHASE: phase, layout.ARM: arm, layout.STOPPED_EARLY: early},
                            "params": {
                                "model.mixer": mixer,
                                "model.regime": regime,
                                "model.width": 64,
                                "model.ssog.num_gaussians": 8 if mixer == "ssog" else 4,
                                "data.dataset": "digits",
                                "data.resolution": 16,
                                "train.lr": lr,
                                "train.seed": seed,
                                "train.epochs": COMPARISON_EPOCHS,
                            },
                            "metrics": metrics,
                            "epochs": learning_curve(val, mixer, regime, phase),
                        }
                    )
    return out


def write_comparison_study(uri: str, artifacts: Path) -> None:
    """The comparison trials in MLflow, under a parent with the reference tag and a spec.yaml."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.create_experiment(COMPARISON_STUDY, artifact_location=artifacts.as_uri())
    parent = client.create_run(
        exp,
        tags={
            layout.ROLE: "study",
            layout.STUDY: COMPARISON_STUDY,
            layout.KIND: "comparison",
            layout.REFERENCE: json.dumps(COMPARISON_REFERENCE),
        },
    ).info.run_id
    spec = {"name": COMPARISON_STUDY, "space": COMPARISON_SPACE, "search": {"fidelity": COMPARISON_FIDELITY}}
    client.log_text(parent, json.dumps(spec), "spec.yaml")
    choices = {arm: {"arm": arm, "confirmation": c} for arm, c in COMPARISON_CONFIRMATION.items()}
    client.log_text(parent, json.dumps({"choices": choices, "final_done": True}), layout.COMPARISON_ARTIFACT)
    client.set_tag(parent, layout.RANK_TRANSFER, json.dumps({arm: {"n": 2} for arm in choices}))
    rng = np.random.default_rng(11)
    for t in comparison_trials():
        tags = {
            layout.STUDY: COMPARISON_STUDY,
            layout.KIND: "comparison",
            layout.TRIAL_ID: t["trial"],
            layout.STATUS: t["status"],
            **t["tags"],
        }
        epochs = t["epochs"]
        final = {k: v for k, v in t["metrics"].items() if k not in epochs[-1]}  # val_top1: the last epoch's
        run_id = _log_run(
            client, exp, parent, tags, t["params"], epochs, final, status=t["status"], first_step=1
        )
        if t["tags"][layout.PHASE] == "final" and t["params"]["model.regime"] in PREDICTING_REGIMES:
            log_predictions(client, run_id, t["metrics"], rng)
