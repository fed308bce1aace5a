"""Figures people can read: labelled parallel-coordinate axes with a colour bar, no figure or
section along an axis that takes one value, and a note wherever error bars were cut at 0-100 %."""

from __future__ import annotations

from pathlib import Path

import pytest
from analysis_stores import fake_run

from vitscale.analysis.figures import scaling as figures
from vitscale.analysis.figures.parallel import parallel_coordinates
from vitscale.analysis.figures.style import CLIPPED_NOTE
from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.tracking import layout


def test_categorical_axes_are_labelled_and_the_objective_has_a_colour_bar():
    columns = {
        "model.attention.backend": ["sdpa", "math", "sdpa", "math"],
        "model.ssog.offsets": [True, False, True, True],
        "train.lr": [1e-4, 1e-3, 1e-2, 3e-3],  # spans 100x: log axis, labelled at its ends
    }
    fig = parallel_coordinates(columns, [0.61, 0.72, 0.55, 0.80], "val_top1")
    ax, bar = fig.axes  # the plot and its colour bar
    labels = [t.get_text().strip() for t in ax.texts]
    assert {"math", "sdpa", "True", "False"} <= set(labels)
    assert {"0.0001", "0.01"} <= set(labels)  # numeric axes read in their own units
    assert {"0.55", "0.8"} <= set(labels)  # the objective axis too
    # each category sits on its own axis line, at its scaled position
    at = {(round(t.get_position()[0]), t.get_text().strip()): t.get_position()[1] for t in ax.texts}
    assert at[(0, "math")] == 0.0 and at[(0, "sdpa")] == 1.0
    assert [t.get_text() for t in ax.get_xticklabels()] == [*columns, "val_top1"]
    assert list(ax.get_yticks()) == []  # no meaningless 0 / 0.5 / 1 scale
    assert bar.get_ylabel() == "val_top1"
    assert bar.get_ylim() == pytest.approx((0.55, 0.80))


def _train_runs(top1_of, nfe: float | None = 4.0) -> list:
    """One width: attention and ssog, discrete and ode, three seeds each."""
    runs, n = [], 0
    for mixer in ("attention", "ssog"):
        for regime in ("discrete", "ode"):
            for seed in (0, 1, 2):
                n += 1
                cfg = {
                    "model.mixer": mixer,
                    "model.regime": regime,
                    "model.width": 32,
                    "train.seed": seed,
                    "data.resolution": 32,
                    "model.patch_size": 4,
                }
                params = 2.7e4 if mixer == "attention" else 2.2e4
                metrics = {"val_top1": top1_of(mixer, seed), "params": params, "flops_per_image": 64 * params}
                if regime == "ode" and nfe is not None:
                    metrics["nfe_mean"] = nfe
                key = {layout.CONFIG_KEY: f"{mixer}-{regime}"}
                runs.append(fake_run(f"r{n:03d}", f"t{n:03d}", n, cfg, metrics, **key))
    return runs


def _analyze(runs: list, tmp_path: Path):
    table = runs_to_table(runs, "one-width")
    snap = write_snapshot(StudyRuns("one-width", "train", table, ["p1"]), tmp_path / "in" / "runs.parquet")
    res = analyze("one-width", out=tmp_path / "out", from_parquet=snap, n_boot=20)
    return res, res.report_path.read_text()


@pytest.fixture
def drawn(monkeypatch) -> dict:
    """name -> Figure of every figure `analysis.figures.scaling` saves (saved as usual)."""
    figs, real_save = {}, figures.save

    def keep(fig, out_dir, name):
        figs[name] = fig
        return real_save(fig, out_dir, name)

    monkeypatch.setattr(figures, "save", keep)
    return figs


def test_a_study_with_one_width_and_one_nfe_draws_no_scaling_or_nfe_figure(tmp_path, drawn):
    # seeds spread ~9 points around 97 %: the t-interval passes 100 % and is cut there
    res, report = _analyze(_train_runs(lambda m, s: 0.97 + 0.03 * (s - 1) * (m == "ssog")), tmp_path)
    names = {p.stem for p in res.figure_paths}
    assert "accuracy_vs_params" in names and "accuracy_vs_flops" in names
    assert "accuracy_vs_nfe" not in names  # every ODE configuration took 4 evaluations
    assert "error_vs_params" not in names  # one size per mixer x regime: no scaling to show
    assert "not fitted: 1 sizes" not in report
    assert report.count("No scaling-law fit: every mixer × regime ran at one size.") == 1
    assert "### val_top1 vs nfe_mean" not in report
    assert "Not shown: val_top1 against nfe_mean (4), one value for every configuration." in report
    notes = [t.get_text() for t in drawn["accuracy_vs_params"].texts]
    assert notes == [CLIPPED_NOTE]


def test_no_clipping_note_where_no_bar_was_cut(tmp_path, drawn):
    _analyze(_train_runs(lambda m, s: 0.6 + 0.01 * s), tmp_path)
    assert [t.get_text() for t in drawn["accuracy_vs_params"].texts] == []
