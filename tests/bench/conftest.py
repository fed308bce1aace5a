"""Tiny benchmark sweeps shared by the bench tests (CPU, one thread, a few ms per forward)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn

from vitscale.bench.config import BenchmarkConfig

TINY = dict(
    mixers=["attention", "ssog"],
    regimes=["discrete"],
    resolutions=[16],
    model={"width": 16, "depth": 1, "heads": 2, "patch_size": 8, "num_classes": 5},
    batch_size=2,
    device="cpu",
    warmup=2,
    repeats=3,
    threads=1,
)


def make_config(**overrides: Any) -> BenchmarkConfig:
    return BenchmarkConfig.model_validate({**TINY, **overrides})


class CountingModel(nn.Module):
    """Stands in for a ViT: counts forwards; `fail_with` makes every forward raise it."""

    def __init__(self, classes: int, fail_with: BaseException | None = None) -> None:
        super().__init__()
        self.head = nn.Linear(3, classes)
        self.calls = 0
        self.fail_with = fail_with

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        if self.fail_with is not None:
            raise self.fail_with
        return self.head(images.mean((2, 3)))


@pytest.fixture
def tiny_config():
    """The `make_config` factory (test modules do not import each other)."""
    return make_config


@pytest.fixture
def counting_model():
    return CountingModel


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; these models gain nothing from threads
    yield
    torch.set_num_threads(threads)
