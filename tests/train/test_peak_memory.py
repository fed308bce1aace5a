"""`peak_memory_mb` in every epoch's metrics: CUDA's peak allocated per epoch, else the peak RSS."""

from __future__ import annotations

import resource

import pytest
import torch

from vitscale.train import fit


def test_cpu_epochs_report_the_process_peak_rss(tiny_trial):
    result = fit(tiny_trial(train={"epochs": 2}))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    peaks = [m["peak_memory_mb"] for m in result.history]
    assert len(peaks) == 2 and all(p > 10 for p in peaks)  # a Python process with torch: tens of MB at least
    assert peaks[0] <= peaks[1] <= after  # ru_maxrss only grows


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_epochs_report_the_peak_allocated_of_each_epoch(tiny_trial):
    result = fit(tiny_trial(train={"epochs": 2, "device": "cuda"}))
    peaks = [m["peak_memory_mb"] for m in result.history]
    assert all(0 < p < torch.cuda.get_device_properties(0).total_memory / 2**20 for p in peaks)
