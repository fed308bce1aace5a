"""Small model configs shared by the model tests (CPU, a few ms per forward)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from vitscale.models import ModelConfig

TINY = dict(width=16, heads=2, depth=2, patch_size=2, image_size=8, num_classes=5, ssog={"num_gaussians": 2})


def make_tiny(**overrides: Any) -> ModelConfig:
    """A 4x4-token model (8x8 images, patch 2); keyword arguments override fields."""
    return ModelConfig.model_validate({**TINY, **overrides})


@pytest.fixture
def tiny():
    """The `make_tiny` factory, as a fixture (test modules do not import each other)."""
    return make_tiny


@pytest.fixture(autouse=True)
def _seed_and_threads():
    torch.manual_seed(0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the machine is shared; small ops gain nothing from threads
    yield
    torch.set_num_threads(threads)
