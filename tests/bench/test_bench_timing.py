"""Warmup and repeats: what is timed, how often, and what one iteration is."""

from __future__ import annotations

import statistics

import pytest
import torch

from vitscale.bench import measure
from vitscale.bench.timing import summarise, time_iterations


def test_warmup_iterations_are_run_but_not_timed():
    calls, syncs, cpu = [], [], []
    times = time_iterations(
        lambda: calls.append(1), warmup=3, repeats=5, synchronize=lambda: syncs.append(1), cpu_times=cpu
    )
    assert len(calls) == 8 and len(times) == len(cpu) == 5
    assert len(syncs) == 1 + 5  # once after warmup, once after every timed iteration
    assert all(t >= 0 for t in times + cpu)


def test_cpu_time_leaves_out_waiting():
    import time

    cpu = []
    [wall] = time_iterations(
        lambda: time.sleep(0.05), warmup=0, repeats=1, synchronize=lambda: None, cpu_times=cpu
    )
    assert wall >= 0.05 and cpu[0] < 0.02


def test_zero_warmup_and_the_median():
    assert len(time_iterations(lambda: None, warmup=0, repeats=1, synchronize=lambda: None)) == 1
    stats = summarise([0.2, 0.1, 0.4], batch_size=8)
    assert stats["latency_ms"] == pytest.approx(200.0)
    assert stats["images_per_second"] == pytest.approx(8 / 0.2)


@pytest.mark.parametrize("mode", ["inference", "train"])
def test_a_configuration_runs_one_counting_forward_then_warmup_plus_repeats(
    tiny_config, counting_model, monkeypatch, mode
):
    models = []

    def build(cfg):
        models.append(counting_model(cfg.num_classes))
        return models[-1]

    config = tiny_config(mode=mode, warmup=2, repeats=4)
    before = None
    if mode == "train":
        torch.manual_seed(config.seed)
        before = counting_model(config.model.num_classes).head.weight.detach().clone()
    record = measure.measure_configuration(config, config.configurations()[0], build_model=build)
    assert record["status"] == "ok", record["error"]
    assert models[0].calls == 1 + 2 + 4  # FLOP count, warmup, timed
    assert len(record["latencies_ms"]) == 4 and record["warmup"] == 2 and record["repeats"] == 4
    assert record["latency_ms"] == pytest.approx(statistics.median(record["latencies_ms"]))
    assert record["images_per_second"] == pytest.approx(config.batch_size / (record["latency_ms"] / 1e3))
    assert record["params"] == 3 * 5 + 5 and record["threads"] == 1
    assert record["cpu_ms"] is not None and record["cpu_ms"] >= 0
    assert record["peak_memory_mb"] is None  # in-process on CPU: no per-configuration peak
    if mode == "train":  # AdamW stepped: the weights moved from the seeded initialisation
        assert not torch.equal(models[0].head.weight.detach(), before)


def test_compile_gets_at_least_one_untimed_iteration(tiny_config):
    assert measure.effective_warmup(tiny_config(compile=True, warmup=0)) == 1
    assert measure.effective_warmup(tiny_config(compile=False, warmup=0)) == 0


def test_real_models_get_flops_params_and_nfe(tiny_config):
    config = tiny_config(mixers=["ssog"], regimes=["discrete", "ode"], warmup=0, repeats=1)
    records = [measure.measure_configuration(config, p) for p in config.configurations()]
    discrete, ode = records
    assert discrete["status"] == ode["status"] == "ok"
    assert discrete["nfe"] is None and ode["nfe"] == 4 * config.model.depth  # rk4, step 1, over [0, depth]
    assert discrete["flops_per_image"] > 0 and ode["flops_per_image"] > discrete["flops_per_image"]
    assert discrete["tokens"] == 4 and discrete["attention_backend"] is None


def test_same_inputs_for_every_mixer(tiny_config, monkeypatch):
    seen = []

    class Spy(torch.nn.Module):
        def __init__(self, cfg):
            super().__init__()
            self.head = torch.nn.Linear(3, cfg.num_classes)

        def forward(self, images):
            seen.append(images.clone())
            return self.head(images.mean((2, 3)))

    config = tiny_config(warmup=0, repeats=1)
    for point in config.configurations():
        measure.measure_configuration(config, point, build_model=Spy)
    assert len(seen) == 2 * 3  # (counting forward + 1 timed) x (sdpa, math, ssog)
    assert all(torch.equal(s, seen[0]) for s in seen)


def test_interleaved_timing_is_round_robin_and_a_failing_model_drops_out(tiny_config, counting_model):
    log = []

    class Logged(counting_model):
        def forward(self, images):
            log.append(self.name)
            return super().forward(images)

    def build(cfg):
        model = Logged(cfg.num_classes, fail_with=MemoryError() if cfg.attention.backend == "math" else None)
        model.name = cfg.attention.backend if cfg.mixer == "attention" else cfg.mixer
        return model

    config = tiny_config(warmup=1, repeats=3)
    records = measure.measure_interleaved(config, config.configurations(), build_model=build)
    assert [r["status"] for r in records] == ["ok", "out_of_memory", "ok"]
    assert records[1]["error"].startswith("MemoryError") and records[1]["images_per_second"] is None
    # counting forwards (math fails in its own), warmups, then 3 rounds starting one model later each time
    assert log == ["sdpa", "math", "ssog", "sdpa", "ssog", "sdpa", "ssog", "ssog", "sdpa", "sdpa", "ssog"]
    for r in (records[0], records[2]):
        assert r["timing"] == "interleaved" and len(r["latencies_ms"]) == 3 and r["cpu_ms"] >= 0
