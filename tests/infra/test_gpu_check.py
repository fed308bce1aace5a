"""`make gpu-check` on a machine without CUDA: one line saying so, exit 0 (the GPU paths themselves
run on GPU machines; see vitscale.doctor)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: make gpu-check runs the checks")
def test_gpu_check_on_a_cpu_only_machine_says_so_in_one_line():
    proc = subprocess.run(
        [sys.executable, "-m", "vitscale.doctor", "--gpu"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().count("\n") == 0 and "no CUDA device" in proc.stdout


def test_gpu_check_covers_every_mixer_and_regime():
    from vitscale.doctor import checks
    from vitscale.models import MIXERS, REGIMES

    names = [name for name, _ in checks()]
    for mixer in MIXERS:
        for regime in REGIMES:
            assert f"bf16 train epoch {mixer} x {regime}" in names
    assert {"torch.compile train epoch", "bench: CUDA timing + memory", "study: 2 trials x 0.5 GPU"} <= set(
        names
    )


def test_skip_leaves_out_the_named_checks_and_says_so(monkeypatch, capsys):
    """`--skip study` on a GPU host without Ray: that row reads "skipped", the rest run (the GPU
    itself is the one thing faked here)."""
    from vitscale import doctor

    ran = []

    def needs_ray():
        raise AssertionError("a skipped check ran")

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda _index=0: "fake GPU")
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(
        doctor,
        "checks",
        lambda: [("study: 2 trials x 0.5 GPU", needs_ray), ("bench", lambda: ran.append(1) or "fine")],
    )
    assert doctor.main(["--gpu", "--skip", "study"]) == 0
    out = capsys.readouterr().out
    assert ran == [1]
    assert "skipped" in out and "fine" in out
