"""`make gpu-check` (`python -m vitscale.doctor --gpu`): is this GPU machine ready for vitscale?

Why: CI and most development run on CPUs, where every CUDA-only path is skipped: bf16 autocast in
training, the ODE field's float32 island under autocast, `torch.compile`, CUDA memory statistics and
synchronised timing in `bench`, and Ray packing fractional-GPU trials onto one device. This runs each
of them once, small (a few minutes on one GPU), and prints one table; exit 1 if any failed. On a
machine without CUDA it says so in one line and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch
import yaml

from vitscale.models import MIXERS, REGIMES, ModelConfig, build
from vitscale.models.regimes.ode import NeuralOde
from vitscale.models.registry import BASELINE, CANDIDATE
from vitscale.tracking import layout, store
from vitscale.train import TrialConfig, fit

DEVICE = "cuda"  # a CPU dry run of the checks sets "cpu"
TINY_MODEL = {"width": 64, "depth": 2, "heads": 2, "patch_size": 4}
TINY_DATA = {"dataset": "synthetic", "resolution": 32, "num_train": 256, "num_val": 64, "num_test": 64}


def _fit(mixer: str, regime: str, compile_model: bool = False) -> str:
    """One epoch of the real training loop on CUDA with bf16 autocast (train.precision); each
    regime with its default settings (the ODE's: an adaptive solver)."""
    model = {**TINY_MODEL, "mixer": mixer, "regime": regime}
    train = {
        "epochs": 1,
        "batch_size": 64,
        "device": DEVICE,
        "precision": "bfloat16",
        "compile": compile_model,
    }
    result = fit(TrialConfig.model_validate({"model": model, "data": TINY_DATA, "train": train}))
    loss = result.metrics["train_loss"]
    if not torch.isfinite(torch.tensor(loss)):
        raise RuntimeError(f"train_loss is {loss}")
    return f"train_loss {loss:.3f}, {result.metrics.get('train_images_per_second', 0):.0f} img/s"


def _autocast_dtypes(mixer: str, regime: str) -> str:
    """Under bf16 autocast, Linear layers give bf16, except inside an adaptive ODE's field (fp32)."""
    config = ModelConfig(mixer=mixer, regime=regime, num_classes=10, **TINY_MODEL)  # ODE: adaptive
    model = build(config).to(DEVICE)
    inside = {id(m) for ode in model.modules() if isinstance(ode, NeuralOde) for m in ode.modules()}
    seen: dict[str, set] = {"field": set(), "other": set()}
    for module in model.modules():
        if isinstance(module, torch.nn.Linear):
            where = "field" if id(module) in inside else "other"
            module.register_forward_hook(lambda _m, _i, out, w=where: seen[w].add(out.dtype))
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        model(torch.randn(4, 3, 32, 32, device=DEVICE)).float().sum().backward()
    if seen["other"] != {torch.bfloat16}:
        raise RuntimeError(f"Linear outputs outside the ODE field: {seen['other']} (want bfloat16)")
    if inside and seen["field"] != {torch.float32}:
        raise RuntimeError(f"ODE field Linear outputs under autocast: {seen['field']} (want float32)")
    return "bf16 layers" + (", ODE field fp32" if inside else "")


def _bench() -> str:
    """`vitscale bench` on CUDA: synchronised timing and CUDA peak memory in every record."""
    out = subprocess.run(
        [sys.executable, "-m", "vitscale", "bench", "--device", DEVICE, "--mixers", f"{BASELINE},{CANDIDATE}"]
        + ["--regimes", ",".join(REGIMES), "--resolutions", "32,64", "--width", "64", "--depth", "2"]
        + ["--heads", "2", "--patch-size", "4", "--repeats", "3", "--warmup", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if out.returncode != 0:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "bench failed")
    records = json.loads(out.stdout[out.stdout.index("[") :])
    bad = [
        r
        for r in records
        if r.get("status") != "ok" or not r.get("peak_memory_mb") or r.get("device") != DEVICE
    ]
    if bad:
        raise RuntimeError(f"{len(bad)} of {len(records)} records without CUDA timing/memory: {bad[0]}")
    return f"{len(records)} configurations, peak {max(r['peak_memory_mb'] for r in records):.0f} MB"


def _packed_study() -> str:
    """Two trials with resources.gpu 0.5 on one visible GPU: Ray runs them side by side."""
    folder = Path(tempfile.mkdtemp(prefix="vitscale-gpu-check-"))
    trial = {
        "model": TINY_MODEL,
        "data": TINY_DATA,
        "train": {"epochs": 3, "batch_size": 64, "device": "cuda"},
    }
    study = {
        "name": "gpu-check",
        "trial": trial,
        "space": {"model.mixer": {"grid": [BASELINE, CANDIDATE]}},
        "search": {"algorithm": "grid", "max_concurrent_trials": 2},
        "resources": {"cpu": 1, "gpu": 0.5},
    }
    (folder / "study.yaml").write_text(yaml.safe_dump(study))
    uri = f"sqlite:///{folder / 'mlflow.db'}"
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "0").split(",")[0]}
    args = ["study", "run", "study.yaml", "--tracking-uri", uri, "--storage", "results", "--num-cpus", "2"]
    proc = subprocess.run(
        [sys.executable, "-m", "vitscale", *args, "--quiet"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if proc.returncode != 0:
        raise RuntimeError((proc.stderr.strip() or proc.stdout.strip()).splitlines()[-1])
    client = store.client_for(uri)
    runs = client.search_runs(
        [client.get_experiment_by_name("gpu-check").experiment_id], f"tags.`{layout.ROLE}` = 'trial'"
    )
    if sorted(r.data.tags.get(layout.STATUS) for r in runs) != ["FINISHED", "FINISHED"]:
        raise RuntimeError(f"trials: {[r.data.tags.get(layout.STATUS) for r in runs]}")
    (a, b) = sorted((r.info.start_time, r.info.end_time) for r in runs)
    if b[0] >= a[1]:
        raise RuntimeError("the two 0.5-GPU trials ran one after the other, not packed on the GPU")
    return f"2 trials overlapped {(a[1] - b[0]) / 1000:.0f} s on one GPU"


def checks() -> list[tuple[str, Callable[[], str]]]:
    out: list[tuple[str, Callable[[], str]]] = []
    for mixer in MIXERS:
        for regime in REGIMES:
            out.append(
                (f"autocast dtypes {mixer} x {regime}", lambda m=mixer, r=regime: _autocast_dtypes(m, r))
            )
            out.append((f"bf16 train epoch {mixer} x {regime}", lambda m=mixer, r=regime: _fit(m, r)))
    first = next(iter(REGIMES))  # the standard ViT's stacking
    out.append(("torch.compile train epoch", lambda: _fit(CANDIDATE, first, compile_model=True)))
    out.append(("bench: CUDA timing + memory", _bench))
    out.append(("study: 2 trials x 0.5 GPU", _packed_study))
    return out


def gpu_check(skip: list[str] | None = None) -> int:
    """Run every check whose name contains none of `skip` (e.g. "study" on a GPU host without Ray)."""
    if not torch.cuda.is_available():
        print(
            f"gpu-check: no CUDA device visible to torch {torch.__version__} (CUDA build: {torch.version.cuda}); nothing to check"
        )
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"gpu-check on {torch.cuda.get_device_name(0)} (torch {torch.__version__})")
    for column in ("check", "result", "seconds", "detail"):
        table.add_column(column, justify="right" if column == "seconds" else "left")
    failed = 0
    for name, check in checks():
        if any(text in name for text in skip or ()):
            table.add_row(name, "skipped", "", "--skip")
            continue
        start = time.perf_counter()
        try:
            result, detail = "ok", check()
        except Exception as exc:  # noqa: BLE001 - every failure is a row of the table
            result, detail = (
                "FAIL",
                f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}",
            )
            failed += 1
        torch.cuda.synchronize()
        table.add_row(name, result, f"{time.perf_counter() - start:.1f}", detail[:160])
    Console(width=200).print(table)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vitscale.doctor", description=__doc__.splitlines()[0])
    parser.add_argument("--gpu", action="store_true", help="exercise every CUDA path (the only check so far)")
    parser.add_argument(
        "--skip",
        action="append",
        default=[],
        metavar="TEXT",
        help="skip the checks whose name contains TEXT (repeatable), e.g. --skip study where Ray is absent",
    )
    args = parser.parse_args(argv)
    return gpu_check(args.skip)


if __name__ == "__main__":
    sys.exit(main())
