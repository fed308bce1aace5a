from __future__ import annotations

import pytest

from vitscale.train import TrialConfig


def tiny(**sections) -> TrialConfig:
    """A trial that trains in about a second on CPU: digits at 16x16, a one-block ViT."""
    raw = {
        "model": {"mixer": "ssog", "width": 16, "depth": 1, "heads": 2, "patch_size": 4},
        "data": {"dataset": "digits", "resolution": 16, "num_train": 256, "num_val": 128},
        "train": {"epochs": 3, "batch_size": 64, "threads": 1, "warmup_epochs": 0.5, "lr": 3e-3},
    }
    for section, values in sections.items():
        raw[section] = {**raw[section], **values}
    return TrialConfig.model_validate(raw)


@pytest.fixture
def tiny_trial():
    return tiny
