"""The analysis names no mixer or regime: what it needs of one (colour, marker, line style, search
axes, whether a regime counts NFE) is the declaration's (models.facts), read through
`MIXERS.facts()` / `REGIMES.facts()`. A mixer and a regime defined only in this file, with facts of
their own, reach the figures, the axis studies, the NFE front and report.md with no edit under
analysis/; and no string constant under analysis/ spells a registered mixer's or regime's name."""

from __future__ import annotations

import ast
import csv
import re
from contextlib import nullcontext
from pathlib import Path

import pytest
from analysis_stores import fake_run
from pydantic import BaseModel, ConfigDict, Field

from vitscale.analysis.figures.style import Style, mixer_color, regime_line
from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.models.facts import SearchAxis
from vitscale.models.registry import MIXERS, REGIMES, register_mixer, register_regime
from vitscale.tracking import layout

ANALYSIS = Path(__file__).resolve().parents[2] / "platform" / "vitscale" / "analysis"
MIXER, REGIME = "bandmix", "stepwise"
COLOR, MARKER, LINE = "#123456", "*", "-."


class BandSettings(BaseModel):
    """`model.bandmix`: how many frequency bands each head keeps."""

    model_config = ConfigDict(extra="forbid")

    bands: int = Field(2, ge=1, description="bands per head")


class BandMixer:
    """Facts as class attributes, as `@register_mixer` reads them (the analysis never builds it)."""

    wants_pos_embed = True
    color = COLOR
    axes = (SearchAxis("bands", "Test error vs bands (bandmix)", "bands per head", ("bands",)),)

    def __init__(self, config) -> None:
        self.width, self.build_grid = config.width, config.grid

    def forward(self, x, grid_hw):
        return x


class Stepwise:
    """A regime that counts its field evaluations, with its own marker and line style."""

    default_layer_scale = 0.0
    counts_nfe = True
    marker = MARKER
    line = LINE
    last_nfe = None
    flops_depend_on_values = False

    def __init__(self, config, make_block) -> None:
        self.block = make_block()

    def forward(self, x, grid_hw):
        return x

    def forward_flops(self, outside, unit, nfe=None):
        return outside + unit * (nfe or 1)

    def training_flops(self, outside, unit, forward_nfe=None, backward_nfe=None):
        return 3 * self.forward_flops(outside, unit, forward_nfe)

    def backward_guard(self):
        return nullcontext()


@pytest.fixture
def declared():
    register_mixer(MIXER, settings=BandSettings)(BandMixer)
    register_regime(REGIME)(Stepwise)
    yield
    MIXERS.unregister(MIXER)
    REGIMES.unregister(REGIME)


def _runs() -> list:
    """bandmix over 3 band counts and attention, both in the new regime (NFE 4, 6, 8) and in
    discrete; 3 seeds each."""
    runs = []
    for regime in (REGIME, "discrete"):
        for mixer, bands in ((MIXER, 1), (MIXER, 2), (MIXER, 4), ("attention", None)):
            for seed in (0, 1, 2):
                n = len(runs) + 1
                error = 0.3 / (bands or 1) ** 0.5 + 0.01 * seed
                params = {"model.mixer": mixer, "model.regime": regime, "model.width": 32, "train.seed": seed}
                params |= {"data.resolution": 32, "model.patch_size": 4}
                if bands is not None:
                    params[f"model.{MIXER}.bands"] = bands
                metrics = {"val_top1": 1 - error, "test_top1": 1 - error, "params": 1000.0 * (bands or 3)}
                if regime == REGIME:
                    metrics["nfe_mean"] = 2.0 + 2 * (bands or 3)
                key = f"{mixer}-{regime}-{bands}"
                runs.append(
                    fake_run(f"r{n:03d}", f"t{n:03d}", n, params, metrics, **{layout.CONFIG_KEY: key})
                )
    return runs


def test_a_new_mixer_and_regime_reach_figures_axes_nfe_front_and_report(declared, tmp_path) -> None:
    assert mixer_color(MIXER) == COLOR and regime_line(REGIME) == LINE
    assert Style([MIXER], [REGIME]).of(MIXER, REGIME) == {"color": COLOR, "marker": MARKER}

    snap = write_snapshot(
        StudyRuns("declared", "train", runs_to_table(_runs(), "declared"), ["p1"]), tmp_path / "runs.parquet"
    )
    out = tmp_path / "report"
    analyze("declared", out=out, from_parquet=snap, n_boot=20)

    report = (out / "report.md").read_text()
    assert "Test error vs bands (bandmix)" in report  # the mixer's own axis, a section of its own
    (figure,) = out.rglob("error_vs_bands.svg")
    assert COLOR in figure.read_text().lower()  # drawn in the mixer's declared colour
    (front,) = out.glob("pareto_nfe_mean_val_top1*.csv")  # NFE: only the regime that counts it
    with front.open() as stream:
        assert {row["regime"] for row in csv.DictReader(stream)} == {REGIME}
    assert list(out.rglob("accuracy_vs_nfe.svg"))


def named_strings(source: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, name) for each string constant of `source`, docstrings aside (prose may give an
    example), that spells one of `names` as a word."""
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])", re.I)
    tree = ast.parse(source)
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            match = pattern.search(node.value)
            if match:
                out.append((node.lineno, match.group(0)))
    return out


def test_no_string_under_analysis_names_a_mixer_or_a_regime() -> None:
    """What the analysis needs of a mixer or regime it reads from the declarations, so none of its
    code strings spells a registered name (`"ode"`, `"model.ssog.num_gaussians"`, ...)."""
    names = [*MIXERS, *REGIMES]
    found = [
        f"{path.relative_to(ANALYSIS.parent)}:{line}: {name!r}"
        for path in sorted(ANALYSIS.rglob("*.py"))
        for line, name in named_strings(path.read_text(), names)
    ]
    assert not found, "\n".join(found)


def test_the_check_finds_a_name_in_code_and_not_in_a_docstring() -> None:
    source = '"""Docstring: ssog · ode."""\nx = {"model.ssog.num_gaussians": 1, "model.ssogs": 2}\n'
    assert named_strings(source, ["ssog", "ode"]) == [(2, "ssog")]
