"""`benchmark.dtype: bfloat16` (`vitscale bench --dtype bfloat16`) on the CPU: autocast really runs
there, in both modes, for every mixer and regime, and the record says which precision it timed."""

from __future__ import annotations

import pytest
import torch

from vitscale.bench import measure
from vitscale.bench.fields import bench_params
from vitscale.bench.timing import inference_step, train_step
from vitscale.models import MIXERS, build


@pytest.mark.parametrize("mode", ["inference", "train"])
def test_bf16_records_on_cpu(tiny_config, mode):
    config = tiny_config(
        mixers=sorted(MIXERS), regimes=["discrete", "ode"], mode=mode, dtype="bfloat16", warmup=0, repeats=1
    )
    for point in config.configurations():
        record = measure.measure_configuration(config, point)
        assert record["status"] == "ok", (point, record["error"])
        assert record["dtype"] == "bfloat16" and record["device"] == "cpu"
        assert record["images_per_second"] > 0 and record["flops_per_image"] > 0
    assert bench_params(config, config.configurations()[0])["bench.dtype"] == "bfloat16"


def test_the_timed_step_runs_in_bf16_on_cpu(tiny_config):
    config = tiny_config(dtype="bfloat16")
    model = build(config.model_for(config.configurations()[-1]))
    images, labels = torch.randn(2, 3, 16, 16), torch.tensor([0, 1])
    cpu = torch.device("cpu")
    assert inference_step(model, images, cpu, "bfloat16")().dtype == torch.bfloat16
    assert inference_step(model, images, cpu, "float32")().dtype == torch.float32
    loss = train_step(model, images, labels, cpu, "bfloat16")()
    assert loss.dtype == torch.float32 and torch.isfinite(loss)  # the loss is taken in float32
    assert {p.dtype for p in model.parameters()} == {torch.float32}
