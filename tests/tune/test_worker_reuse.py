"""Reused trial workers (tune.worker_cache): data loaded once per worker, nothing else carried over."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from vitscale.data import DataConfig, bundle
from vitscale.train import TrialConfig, fit
from vitscale.tune import worker_cache
from vitscale.tune.worker_cache import BundleCache, begin_trial, bundle_bytes


def trial(resolution: int, seed: int, dataset: str = "synthetic") -> TrialConfig:
    data = {"dataset": dataset, "resolution": resolution, "num_train": 128, "num_val": 64, "num_test": 64}
    return TrialConfig.model_validate(
        {
            "model": {"mixer": "ssog", "width": 16, "depth": 1, "heads": 2, "patch_size": 4},
            "data": data,
            "train": {"epochs": 2, "batch_size": 64, "threads": 1, "warmup_epochs": 0.5, "seed": seed},
        }
    )


def no_seconds(history):
    """What a trial learned and costs, without its timings and process memory (those vary)."""
    return [{k: v for k, v in m.items() if "second" not in k and "memory" not in k} for m in history]


@pytest.fixture
def cached(monkeypatch):
    """This process as a reused worker: a fresh cache routed into vitscale.data.load."""
    monkeypatch.setattr(worker_cache, "_CACHE", None)
    monkeypatch.setattr(worker_cache, "_DEFAULTS", None)
    monkeypatch.delenv(worker_cache.ENV_CACHE_MB, raising=False)
    threads = torch.get_num_threads()
    yield
    bundle.set_cache(None)
    torch.set_num_threads(threads)


def test_cache_key_is_every_data_field_and_the_device():
    reads = []

    def read(config, device):
        reads.append((config.resolution, config.split_seed, str(device)))
        return bundle.read(config, device)

    cache = BundleCache(2**30)
    base = DataConfig(dataset="digits", resolution=16, num_train=64, num_val=32, num_test=32)
    first = cache.get(base, "cpu", read)
    again = cache.get(base.model_copy(), torch.device("cpu"), read)
    assert len(reads) == 1 and cache.hits == 1
    assert again is not first and again.train_images is first.train_images  # own object, shared tensors
    cache.get(base.model_copy(update={"resolution": 8}), "cpu", read)
    cache.get(base.model_copy(update={"split_seed": 1}), "cpu", read)
    assert reads == [(16, 0, "cpu"), (8, 0, "cpu"), (16, 1, "cpu")]


def test_cache_is_bounded_in_bytes_least_recently_used_out():
    configs = [
        DataConfig(dataset="digits", num_train=64, num_val=32, num_test=32, split_seed=s) for s in range(3)
    ]
    size = bundle_bytes(bundle.read(configs[0]))
    cache = BundleCache(2 * size)
    for config in (configs[0], configs[1], configs[0], configs[2]):  # 0 used again: 1 goes out
        cache.get(config, "cpu", bundle.read)
    assert len(cache) == 2 and cache.nbytes <= 2 * size
    cache.get(configs[0], "cpu", bundle.read)
    cache.get(configs[1], "cpu", bundle.read)
    assert (cache.hits, cache.misses) == (2, 4)
    tiny = BundleCache(size - 1)  # a bundle larger than the cache is read, never kept
    tiny.get(configs[0], "cpu", bundle.read)
    assert len(tiny) == 0


def test_a_bundle_written_in_place_is_read_again():
    cache = BundleCache(2**30)
    config = DataConfig(dataset="digits", num_train=64, num_val=32, num_test=32)
    first = cache.get(config, "cpu", bundle.read)
    clean = first.train_images.clone()
    first.train_images[0].fill_(255)  # a trial that (wrongly) augments in place
    second = cache.get(config, "cpu", bundle.read)
    assert cache.misses == 2 and torch.equal(second.train_images, clean)


def test_cache_off_with_zero_megabytes(monkeypatch):
    monkeypatch.setattr(worker_cache, "_CACHE", None)
    monkeypatch.setenv(worker_cache.ENV_CACHE_MB, "0")
    assert worker_cache.worker_cache() is None


def test_reused_worker_trains_each_trial_as_a_fresh_process_would(cached):
    """Trials A (16 px, seed 0), B (8 px, seed 1), A again in one worker: B gets its own data,
    the second A repeats the first bit for bit, and both equal A trained without the cache."""
    fresh_a = no_seconds(fit(trial(16, 0)).history)
    seen = []
    real_read = bundle.read

    def read(config, device):
        data = real_read(config, device)
        seen.append(data.source_size)
        return data

    bundle.read = read
    try:
        begin_trial()
        first = no_seconds(fit(trial(16, 0)).history)
        torch.set_num_threads(1)
        torch.set_grad_enabled(False)  # what a trial could leave behind
        begin_trial()
        assert torch.is_grad_enabled()
        other = fit(trial(8, 1))
        begin_trial()
        second = no_seconds(fit(trial(16, 0)).history)
    finally:
        bundle.read = real_read
    assert seen == [(16, 16), (8, 8)]  # read once per resolution; the second A came from the cache
    assert worker_cache.worker_cache().hits == 1
    assert other.model_config.image_size == 8
    assert first == second == fresh_a


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux only")
def test_a_new_trial_starts_the_peak_memory_again(cached):
    """CPU peak_memory_mb is the process's peak RSS: a trial must not inherit its predecessor's."""
    from vitscale.train.loop import peak_memory_mb

    big = torch.ones(64 * 2**20, dtype=torch.uint8)  # a previous trial's 64 MiB
    big.fill_(2)
    del big
    before = peak_memory_mb(torch.device("cpu"))
    begin_trial()
    assert peak_memory_mb(torch.device("cpu")) < before - 32


@pytest.mark.slow
def test_a_study_reuses_one_worker_and_each_trial_matches_a_fresh_fit(tmp_path):
    """Through Ray Tune: three trials, one slot: one worker process runs them all, and each
    trial's epochs equal `fit` of the same trial here (so nothing carried over between them)."""
    from study_helpers import TINY_TRIAL, child_runs, vitscale, write_study

    from vitscale.study import load_study, resolve_trial

    study = write_study(
        tmp_path,
        "reuse-tiny",
        space={"data.resolution": {"grid": [16, 8]}, "model.mixer": {"grid": ["ssog"]}},
        search={"algorithm": "grid", "seeds": [0, 1], "max_concurrent_trials": 1},
    )
    assert TINY_TRIAL["data"]["dataset"] == "digits"
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    results = tmp_path / "results"
    vitscale(
        "study", "run", str(study), "--tracking-uri", uri, "--storage", str(results),
        "--num-cpus", "1", "--quiet", cwd=tmp_path,
    )  # fmt: skip
    pids = set()
    for result_file in results.glob("reuse-tiny/*/*/result.json"):
        pids |= {json.loads(line)["pid"] for line in result_file.read_text().splitlines() if line}
    runs = child_runs(uri, "reuse-tiny")
    assert len(runs) == 4 and len(pids) == 1, pids  # one worker ran all four trials
    # Tune's own files: result.json per trial, no progress.csv or TensorBoard events (tracking.tune_loggers)
    assert len(list(results.glob("reuse-tiny/*/*/result.json"))) == 4
    assert not [*results.glob("reuse-tiny/*/*/progress.csv"), *results.glob("reuse-tiny/*/*/events.out.*")]

    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    spec = load_study(study)
    for run in reversed(sorted(runs, key=lambda r: r.info.start_time)):  # another order than the study's
        params = run.data.params
        point = {"data.resolution": int(params["data.resolution"]), "model.mixer": "ssog"}
        config = resolve_trial(spec, point, int(params["train.seed"]))
        config = config.model_copy(update={"train": config.train.model_copy(update={"threads": 1})})
        expected = [m["val_top1"] for m in fit(config).history]
        got = [
            m.value
            for m in sorted(client.get_metric_history(run.info.run_id, "val_top1"), key=lambda m: m.step)
        ]
        assert got == expected, params
