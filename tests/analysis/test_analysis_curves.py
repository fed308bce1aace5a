"""Learning curves and convergence: the still-improving rule on hand-made curves, the histories read
from MLflow (the comparison store, whose ssog · ode arm is still improving), one figure per regime,
each arm's budget and mark beside the verdicts, the note on a verdict with a still-improving arm
(report, deltas.csv, the CLI), and arms that cannot be judged marked undetermined."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from analysis_stores import (
    COMPARISON_EPOCHS,
    COMPARISON_STUDY,
    IMAGES_PER_EPOCH,
    STILL_IMPROVING_ARM,
    fake_run,
)
from matplotlib.image import imread

from vitscale.analysis.load.curves import CURVES, SCHEMA
from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.analysis.statistics.convergence import (
    CONVERGED,
    STILL_IMPROVING,
    UNDETERMINED,
    judge_convergence,
)
from vitscale.errors import UserError
from vitscale.tracking import layout

THRESHOLD = 0.005  # 0.5 points
X = 1000.0 * np.arange(1, 17)  # 16 evaluated epochs of 1000 images
FLAT = 0.80 - 0.3 * np.exp(-np.arange(16.0))  # saturated long before the last quarter
IMPROVING = FLAT - 0.01 * (16 - np.arange(1, 17))  # still +1 point per epoch at the end
# Flat, but its last point sits 0.6 points above the quarter's first: a line through the
# quarter (epochs 12-16) gains 0.32 points, so one lucky epoch does not make it "still improving".
NOISY = np.concatenate([np.full(11, 0.80), [0.795, 0.812, 0.790, 0.808, 0.801]])
IMPROVING_ARM = "model.mixer={},model.regime={}".format(*STILL_IMPROVING_ARM)


@pytest.mark.parametrize(
    ("x", "y", "mark"),
    [
        (X, IMPROVING, STILL_IMPROVING),
        (X, FLAT, CONVERGED),
        (X, NOISY, CONVERGED),
        (X[:3], IMPROVING[:3], UNDETERMINED),  # 3 evaluated epochs
        (X, np.where(np.arange(16) % 5 == 4, IMPROVING, np.nan), UNDETERMINED),  # eval_every 5: 3 points
        (X, np.where(np.arange(16) % 2 == 1, IMPROVING, np.nan), STILL_IMPROVING),  # every 2nd: 8 points
    ],
    ids=["improving", "flat", "noisy", "too-short", "sparse-too-short", "sparse"],
)
def test_the_still_improving_rule_on_hand_made_curves(x, y, mark):
    got = judge_convergence(x, y, THRESHOLD)
    assert got.mark == mark
    if mark == UNDETERMINED:
        assert math.isnan(got.gain) and got.points == 3 and "needs 4" in got.reason
    else:
        assert (got.gain > THRESHOLD) == (mark == STILL_IMPROVING)
    assert NOISY[-1] - NOISY[-5] > THRESHOLD  # the endpoints alone would call the noisy curve improving
    assert judge_convergence(X, IMPROVING, 0.05).mark == CONVERGED  # +4 points: below a 5-point threshold


@pytest.fixture(scope="module")
def analysed(stores, tmp_path_factory):
    return analyze(COMPARISON_STUDY, stores["uri"], tmp_path_factory.mktemp("curves") / "out", n_boot=0)


def test_histories_are_read_from_mlflow_and_each_arm_is_marked(analysed):
    res = analysed
    curves = pq.read_table(res.curves_path)
    assert curves.column_names == SCHEMA.names
    assert curves.num_rows == 4 * 4 * COMPARISON_EPOCHS  # 4 arms x 4 final seeds x their epochs
    marks = {c.label: c.convergence.mark for c in res.curves}
    assert marks.pop(IMPROVING_ARM) == STILL_IMPROVING
    assert set(marks.values()) == {CONVERGED}
    improving = next(c for c in res.curves if c.label == IMPROVING_ARM)
    assert improving.convergence.gain == pytest.approx(0.025, abs=0.002)  # 1.2 points an epoch, 2 epochs
    assert improving.x_unit == "images" and improving.x[-1] == COMPARISON_EPOCHS * IMAGES_PER_EPOCH
    b = improving.budget
    assert (b.runs, b.epochs, b.images_seen, b.training_images) == (4, 8, 12800, IMAGES_PER_EPOCH)
    assert b.train_flops == pytest.approx(3.0e6 * 12800)
    assert {c.label.split(",")[1]: c.has_test for c in res.curves} == {
        "model.regime=discrete": True,  # their final runs logged curve_test_top1
        "model.regime=ode": False,
    }


def test_one_readable_figure_per_regime(analysed):
    res = analysed
    names = sorted(p.name for p in res.curve_figures)
    assert names == [
        "learning_curves_discrete.png",
        "learning_curves_discrete.svg",
        "learning_curves_ode.png",
        "learning_curves_ode.svg",
    ]
    assert set(res.curve_figures) <= set(res.figure_paths)
    for png in (p for p in res.curve_figures if p.suffix == ".png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
        pixels = imread(png)
        assert pixels.shape[0] > 400 and pixels.shape[1] > 600
        assert len(np.unique(pixels.reshape(-1, pixels.shape[-1]), axis=0)) > 100  # lines, not a blank
    svg = (res.out_dir / "figures" / "learning_curves_ode.svg").read_text()
    assert "images seen" in svg and "top-1 accuracy (%)" in svg and "still improving" in svg


def test_the_verdict_section_states_budgets_and_marks_and_notes_the_improving_arm(analysed, capsys):
    res = analysed
    report = res.report_path.read_text()
    lines = report.splitlines()
    ode = next(line for line in lines if line.startswith("| ssog · ode | attention · ode |"))
    discrete = next(line for line in lines if line.startswith("| ssog · discrete | attention · discrete |"))
    assert "| ±1 | worse (still improving: ssog · ode) |" in ode
    assert "| ±1 | better |" in discrete  # both arms converged: no note
    assert "### Budget and convergence of each arm" in report
    assert "| ssog · ode | 4 | 8 | 12.8 k | 1.6 k | 38.4 G | 8 | +2.5" in report
    assert "| **still improving** |" in report and "| attention · ode | 4 | 8 | 12.8 k |" in report
    assert "more than 0.5 points: **still improving** (`--converged-threshold`)" in report
    assert "fewer than 4 evaluated epochs: **undetermined**" in report
    assert "## Learning curves" in report
    assert "![learning curves ode](figures/learning_curves_ode.png)" in report
    assert report.count("learning_curves_ode.png") == 1  # in its section, not again under Figures
    assert "No test curve for attention · ode, ssog · ode: no run logged `curve_test_top1`" in report
    deltas = {r["arm"]: r for r in pacsv.read_csv(res.out_dir / "deltas.csv").to_pylist()}
    row = deltas[IMPROVING_ARM]
    assert row["convergence_note"] == "still improving: ssog · ode" and row["verdict"] == "worse"
    assert (row["arm_convergence"], row["reference_convergence"]) == (STILL_IMPROVING, CONVERGED)
    assert not deltas["model.mixer=ssog,model.regime=discrete"]["convergence_note"]
    arms = {r["arm"]: r for r in pacsv.read_csv(res.out_dir / "arms.csv").to_pylist()}
    assert arms[IMPROVING_ARM]["convergence"] == STILL_IMPROVING
    assert (
        arms[IMPROVING_ARM]["images_seen"] == 12800
        and arms[IMPROVING_ARM]["converged_threshold_points"] == 0.5
    )


def test_a_redraw_offline_reads_the_curves_and_takes_another_threshold(analysed, tmp_path, capsys):
    from vitscale.cli import main

    argv = ["analyze", COMPARISON_STUDY, "--from", str(analysed.runs_path), "--out", str(tmp_path)]
    main([*argv, "--converged-threshold", "3"])
    out = capsys.readouterr().out
    assert "ssog · ode − attention · ode: worse (p=" in out and "still improving" not in out
    report = (tmp_path / "report.md").read_text()
    assert "more than 3 points: **still improving**" in report and "| ±1 | worse |" in report
    assert (tmp_path / "curves.parquet").read_bytes() == analysed.curves_path.read_bytes()
    main(argv)
    assert "(still improving: ssog · ode)" in capsys.readouterr().out
    assert (tmp_path / "report.md").read_text() == analysed.report_path.read_text()


def _runs(with_val: bool = True) -> list:
    """Two arms (attention, ssog; discrete) over 3 seeds with final val and test top-1."""
    runs = []
    for n, (mixer, seed) in enumerate(((m, s) for m in ("attention", "ssog") for s in range(3)), start=1):
        top1 = 0.80 + 0.03 * (mixer == "ssog") + 0.01 * seed + 0.001 * n
        cfg = {
            "model.mixer": mixer,
            "model.regime": "discrete",
            "model.width": 64,
            "train.seed": seed,
            "train.epochs": 3,
            "data.dataset": "digits",
        }
        runs.append(fake_run(f"r{n}", f"t{n}", n, cfg, {"val_top1": top1, "test_top1": top1 - 0.01}))
    return runs


def _snapshot(tmp_path, runs: list, curves: pa.Table | None = None):
    snap = write_snapshot(StudyRuns("s", "train", runs_to_table(runs, "s")), tmp_path / "in" / "runs.parquet")
    if curves is not None:
        CURVES.write(curves, snap.parent / CURVES.file)
    return snap


def test_without_histories_every_arm_is_undetermined_never_converged(tmp_path):
    res = analyze("s", out=tmp_path / "out", from_parquet=_snapshot(tmp_path, _runs()), n_boot=0)
    assert {c.convergence.mark for c in res.curves} == {UNDETERMINED}
    assert {c.convergence.reason for c in res.curves} == {"no per-epoch history read"}
    report = res.report_path.read_text()
    assert "No learning curves: no per-epoch history was read" in report
    assert "Convergence undetermined for attention · discrete · 64, ssog · discrete · 64" in report
    assert "undetermined (no per-epoch history read)" in report
    (row,) = pacsv.read_csv(res.out_dir / "deltas.csv").to_pylist()
    assert row["convergence_note"] == "undetermined: ssog · discrete · 64, attention · discrete · 64"
    assert res.curves_path is None and not res.curve_figures


def test_too_few_evaluated_epochs_and_epochs_without_validation(tmp_path):
    """3 epochs, one without a validation point (`train.eval_every`): 2 points, undetermined, and
    drawn; no images_seen logged (an older trainer): against epochs."""
    rows = [
        {"run_id": f"r{n}", "epoch": e, "images_seen": None, "val_top1": v, layout.CURVE_TEST_TOP1: None}
        for n in range(1, 7)
        for e, v in ((1, 0.5), (2, None), (3, 0.8))
    ]
    curves = pa.Table.from_pylist(rows, schema=SCHEMA)
    res = analyze("s", out=tmp_path / "out", from_parquet=_snapshot(tmp_path, _runs(), curves), n_boot=0)
    assert {(c.convergence.mark, c.convergence.points, c.x_unit) for c in res.curves} == {
        (UNDETERMINED, 2, "epochs")
    }
    assert list(res.curves[0].epoch) == [1, 3]
    report = res.report_path.read_text()
    assert "undetermined (2 evaluated epochs, needs 4)" in report
    assert "Against epochs, not images seen (runs that logged no `images_seen`)" in report
    assert [p.name for p in res.curve_figures] == [
        "learning_curves_discrete.png",
        "learning_curves_discrete.svg",
    ]


def test_a_threshold_outside_0_to_100_points_is_one_line(tmp_path):
    with pytest.raises(UserError, match=r"--converged-threshold: -1 points is not between 0 and 100"):
        analyze("s", out=tmp_path, from_parquet=_snapshot(tmp_path, _runs()), converged_threshold=-1)
