"""A mixer with two settings, defined only here, reaches every part of the platform.

The registry is the one place the platform learns about mixers and their settings: this file
registers `rollmix` (roll the token grid, scale it, project) with its settings model and then,
with no other edit, sees its flags in `vitscale model info --help`, its validation, a study that
searches its settings, a `vitscale bench` row (measured in the benchmark's worker processes,
which load it through VITSCALE_PLUGINS) and its settings as columns of `vitscale analyze`.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch
from pydantic import BaseModel, ConfigDict, Field
from torch import Tensor, nn

from vitscale.cli import main
from vitscale.models.registry import MIXERS, PLUGINS_ENV, register_mixer
from vitscale.study import paths

if TYPE_CHECKING:
    from vitscale.models.config import ModelConfig

NAME = "rollmix"
TINY = ["--width", "16", "--heads", "2", "--depth", "1", "--patch-size", "8"]


class RollSettings(BaseModel):
    """`model.rollmix`: how far and how strongly the grid is rolled."""

    model_config = ConfigDict(extra="forbid")

    shift: int = Field(1, ge=0, description="tokens each grid row is rolled by")
    gain: float = Field(1.0, gt=0, description="scale of the rolled tokens")


class RollMixer(nn.Module):
    """Grid tokens rolled along rows by `shift`, times `gain`, through one projection; cls: grid mean."""

    wants_pos_embed = True

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.width, self.build_grid = config.width, config.grid  # the mixer contract
        settings = config.settings(NAME)
        self.shift, self.gain = settings.shift, settings.gain
        self.proj = nn.Linear(config.width, config.width)

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        b, t, c = x.shape
        p = t - grid_hw[0] * grid_hw[1]
        grid = x[:, p:].reshape(b, *grid_hw, c).roll(self.shift, dims=2).reshape(b, -1, c) * self.gain
        prefix = grid.mean(1, keepdim=True).expand(b, p, c)
        return self.proj(torch.cat([prefix, grid], dim=1))


def register_rollmix() -> None:
    """Register the mixer (called here, and by worker processes through VITSCALE_PLUGINS)."""
    if NAME not in MIXERS:
        register_mixer(NAME, settings=RollSettings)(RollMixer)


@pytest.fixture(autouse=True)
def rollmix(monkeypatch):
    register_rollmix()
    monkeypatch.setenv(PLUGINS_ENV, f"{Path(__file__).resolve()}:register_rollmix")
    yield
    MIXERS.unregister(NAME)


def cli(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(list(args))
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


def test_flags_with_descriptions_appear_in_model_info_help(capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")  # one flag per line: its description unwrapped
    code, out, _ = cli(capsys, "model", "info", "--help")
    assert code == 0
    assert "--rollmix-shift" in out and "--rollmix-gain" in out
    assert "tokens each grid row is rolled by" in out and "scale of the rolled tokens" in out


def test_model_info_builds_it_with_its_settings_and_validates_them(capsys) -> None:
    code, out, _ = cli(
        capsys, "model", "info", "--mixer", NAME, *TINY, "--rollmix-shift", "2", "-r", "32", "--json"
    )
    assert code == 0
    [row] = json.loads(out)
    assert row["config"][NAME] == {"shift": 2, "gain": 1.0} and row["params"] > 0
    code, _, err = cli(capsys, "model", "info", "--mixer", NAME, *TINY, "--rollmix-gain", "0", "-r", "32")
    assert code == 2 and err.strip().splitlines() == [
        "error: rollmix.gain: Input should be greater than 0 (got 0.0)"
    ]


def test_a_study_searches_its_settings_and_the_guard_checks_they_can_meet_it(capsys, tmp_path) -> None:
    study = tmp_path / "roll.yaml"
    study.write_text(
        "name: roll\n"
        "trial: {model: {width: 16, heads: 2, depth: 1, rollmix: {gain: 0.5}}, train: {epochs: 1}}\n"
        "space:\n"
        "  model.mixer: {choice: [attention, rollmix]}\n"
        "  model.rollmix.shift: {choice: [1, 2], when: {model.mixer: rollmix}}\n"
    )
    code, out, err = cli(capsys, "study", "validate", str(study))
    assert code == 0, err
    assert "3 grid points" in out or "3 trials" in out, out
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\n"
        "trial: {model: {mixer: attention}}\n"
        "space:\n"
        "  model.rollmix.gain: {choice: [0.5, 2.0]}\n"
        "  model.rollmix.shift: {choice: [-1]}\n"
    )
    code, _, err = cli(capsys, "study", "validate", str(bad))
    lines = err.strip().splitlines()
    assert code == 2
    assert any(
        "space.model.rollmix.gain: only the rollmix mixer uses model.rollmix" in line for line in lines
    )
    assert any(
        "space.model.rollmix.shift: -1: Input should be greater than or equal to 0" in line for line in lines
    )


def test_bench_measures_it_and_analyze_reports_its_settings_as_columns(capsys, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    paths._lookup.cache_clear()
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["bench", "--mixers", f"attention,{NAME}", "--regimes", "discrete", "--resolutions", "16,32",
            *TINY, "--num-classes", "5", "--batch-size", "2", "--warmup", "0", "--repeats", "2",
            "--device", "cpu", "--attention-backends", "sdpa", "--rollmix-gain", "0.5",
            "--tracking-uri", uri, "--name", "roll-bench", "--json"]  # fmt: skip
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    records = json.loads(out)
    rows = [r for r in records if r["mixer"] == NAME]
    assert len(rows) == 2 and all(r["status"] == "ok" and r["images_per_second"] > 0 for r in rows), rows
    assert all(r["model.rollmix.gain"] == 0.5 and r["model.rollmix.shift"] == 1 for r in rows)

    code, _, err = cli(
        capsys, "analyze", "roll-bench", "--tracking-uri", uri, "--out", str(tmp_path / "report")
    )
    assert code == 0, err
    table = next((tmp_path / "report").glob("pareto_resolution_images_per_second*.csv"))
    with table.open() as stream:
        read = list(csv.DictReader(stream))
    assert {"rollmix.shift", "rollmix.gain"} <= set(read[0])
    roll = [r for r in read if r["mixer"] == NAME]
    assert roll and all(r["rollmix.gain"] == "0.5" for r in roll)
    assert all(r["rollmix.gain"] == "" for r in read if r["mixer"] == "attention")
