"""The other axes as scaling curves (analysis.statistics.axes): per level the mean test error ± t over seeds,
a trend only through >= 6 levels, NFE beside the solver tolerance, nothing for an axis that does
not vary, no pooling across another param, and the figure, section and CSV of each varying axis."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pytest
from scipy import stats

from vitscale.analysis.figures.axes import axis_figure
from vitscale.analysis.load.fields import with_fields
from vitscale.analysis.load.outcomes import with_outcomes
from vitscale.analysis.report.axes import axes_section, write_axes_csv
from vitscale.analysis.statistics.axes import axes_table, axis_studies, axis_study

SEEDS = (0, 1, 2)
A, B, C = 0.5, 0.6, 0.05  # error(K) = A·K^-B + C


def _run(i: int, **over) -> dict:
    row = {
        "run_id": f"r{i:03d}",
        "status": "FINISHED",
        "stopped_early": False,
        "failure_reason": None,
        "config_key": None,
        "model.mixer": "ssog",
        "model.regime": "discrete",
        "model.width": 32,
        "model.ssog.num_gaussians": 4,
        "model.ode.solver": "dopri5",
        "model.ode.rtol": 1e-3,
        "model.ode.atol": 1e-4,
        "data.resolution": 32,
        "model.image_size": 32,
        "data.dataset": "digits",
        "train.seed": 0,
        "train.lr": 1e-3,
        "val_top1": 0.8,
        "test_top1": 0.8,
        "test_nfe_mean": math.nan,
    }
    row.update(over)
    return row


def _runs(rows: list[dict]) -> tuple[pa.Table, list[str]]:
    names = list(dict.fromkeys(k for r in rows for k in r))  # from_pylist reads the first row's keys only
    table = pa.Table.from_pylist(
        [{k: r.get(k, math.nan if k.startswith("test_") else None) for k in names} for r in rows]
    )
    params = [c for c in table.column_names if c.startswith(("model.", "data.", "train."))]
    return with_outcomes(with_fields(table)), params


def _gaussians(levels, widths=(32,), noise=0.003, seed=0) -> tuple[list[dict], dict]:
    """ssog runs over K x width x seeds, error = A·K^-B + C (+ width shift) + noise; truth per run."""
    rng = np.random.default_rng(seed)
    rows, truth = [], {}
    for width in widths:
        for k in levels:
            for s in SEEDS:
                err = A * k**-B + C + (0.02 if width != widths[0] else 0.0) + rng.normal(0, noise)
                truth[(width, k, s)] = err
                rows.append(
                    _run(
                        len(rows),
                        **{
                            "model.ssog.num_gaussians": k,
                            "model.width": width,
                            "train.seed": s,
                            "test_top1": 1 - err,
                        },
                    )
                )
    return rows, truth


def test_a_power_law_over_six_levels_is_fitted_and_its_interval_holds_the_truth():
    rows, _ = _gaussians((1, 2, 4, 8, 16, 32))
    runs, params = _runs(rows)
    study = axis_study(runs, params, axes_table()["num_gaussians"], n_boot=50, seed=0)
    (curve,) = study.curves
    t = curve.trend
    assert t.status == "ok" and t.kind == "power_law" and t.n_levels == 6
    lo, hi = t.ci
    assert lo <= B <= hi and hi - lo < 0.4
    assert abs(t.estimate - B) <= max(B - lo, hi - B)


def test_four_levels_give_stats_per_level_and_no_trend_with_the_reason():
    rows, truth = _gaussians((2, 4, 8, 16))
    runs, params = _runs(rows)
    (curve,) = axis_study(runs, params, axes_table()["num_gaussians"], n_boot=50).curves
    assert [lv.x for lv in curve.levels] == [2, 4, 8, 16]
    assert all(lv.error[2] == 3 and math.isfinite(lv.error[1]) for lv in curve.levels)
    assert curve.trend.status == "not_fitted" and curve.trend.estimate is None
    assert curve.trend.reason == "4 levels: no trend fitted (needs 6)"
    assert "4 levels: no trend fitted (needs 6)" in "\n".join(
        axes_section([axis_study(runs, params, axes_table()["num_gaussians"])])
    )


def test_means_and_intervals_equal_a_hand_computation():
    rows, truth = _gaussians((2, 4, 8))
    rows[0]["status"] = "FAILED"  # K=2, seed 0: dropped under "drop", chance (0.9 error) under "chance"
    runs, params = _runs(rows)
    for policy, first in (("drop", None), ("chance", 0.9)):
        (curve,) = axis_study(runs, params, axes_table()["num_gaussians"], policy, n_boot=0).curves
        for level in curve.levels:
            errs = [truth[(32, int(level.x), s)] for s in SEEDS]
            if level.x == 2:
                errs = errs[1:] if first is None else [first, *errs[1:]]
            errs = np.array(errs)
            half = stats.t.ppf(0.975, errs.size - 1) * errs.std(ddof=1) / math.sqrt(errs.size)
            assert level.error[0] == pytest.approx(errs.mean(), abs=1e-12)
            assert level.error[1] == pytest.approx(half, abs=1e-12)
            assert level.error[2] == errs.size
        assert curve.levels[0].counts["n_failed"] == 1 and curve.levels[0].counts["n_runs"] == 3


def test_runs_differing_in_another_param_are_not_pooled_across_it():
    rows, truth = _gaussians((2, 4, 8), widths=(32, 64))
    runs, params = _runs(rows)
    curves = axis_study(runs, params, axes_table()["num_gaussians"], n_boot=0).curves
    assert sorted(c.fixed["model.width"] for c in curves) == [32, 64]
    for c in curves:
        width = c.fixed["model.width"]
        assert "width=" in c.label
        for level in c.levels:
            assert level.error[2] == 3
            assert level.error[0] == pytest.approx(np.mean([truth[(width, int(level.x), s)] for s in SEEDS]))


def _tolerance_rows() -> list[dict]:
    rows = []
    for rtol, atol in ((1e-2, 1e-3), (1e-3, 1e-4), (1e-4, 1e-5)):
        for s in SEEDS:
            nfe = 10 * math.log10(1 / rtol) + s
            rows.append(
                _run(
                    len(rows),
                    **{
                        "model.regime": "ode",
                        "model.ode.rtol": rtol,
                        "model.ode.atol": atol,
                        "train.seed": s,
                        "test_top1": 0.9 - rtol,
                        "test_nfe_mean": nfe,
                    },
                )
            )
    rows.append(
        _run(len(rows), **{"model.regime": "ode", "model.ode.solver": "euler", "model.ode.rtol": 1e-1})
    )
    return rows


def test_the_tolerance_axis_reports_the_nfe_of_each_level():
    runs, params = _runs(_tolerance_rows())
    tolerance = axes_table()["tolerance"]
    (curve,) = axis_study(runs, params, tolerance, n_boot=0).curves  # the euler run is not on it
    assert curve.x_param == "model.ode.rtol" and curve.cost_metric == "test_nfe_mean"
    for level in curve.levels:
        assert level.riding == {"model.ode.atol": pytest.approx(level.x / 10)}
        assert level.cost[0] == pytest.approx(10 * math.log10(1 / level.x) + 1) and level.cost[2] == 3
    assert curve.trend.reason == "3 levels: no trend fitted (needs 6)"


def test_an_axis_that_does_not_vary_produces_nothing(tmp_path):
    runs, params = _runs(_tolerance_rows())  # Gaussians, resolution fixed; no evaluation sides
    studies = axis_studies(runs, params, n_boot=0)
    assert [s.axis.name for s in studies] == ["tolerance"]
    assert axis_study(runs, params, axes_table()["num_gaussians"]) is None
    assert axes_section([]) == [] and write_axes_csv([], tmp_path) is None


def test_evaluation_sides_and_training_resolution_are_axes_of_their_own():
    rows = []
    for res in (16, 32):
        for s in SEEDS:
            rows.append(
                _run(
                    len(rows),
                    **{
                        "data.resolution": res,
                        "model.image_size": res,
                        "train.seed": s,
                        "test_top1": 0.7 + res / 100,
                        "test_top1_at48": 0.5,
                    },
                )
            )
    runs, params = _runs(rows)
    by_name = {s.axis.name: s for s in axis_studies(runs, params, n_boot=0)}
    assert set(by_name) == {"resolution", "eval_resolution"}
    assert [lv.x for lv in by_name["resolution"].curves[0].levels] == [16, 32]
    sides = {c.fixed["data.resolution"]: [lv.x for lv in c.levels] for c in by_name["eval_resolution"].curves}
    assert sides == {16: [16, 48], 32: [32, 48]}


def test_figure_section_and_csv_of_each_varying_axis(tmp_path):
    rows, _ = _gaussians((1, 2, 4, 8, 16, 32))
    runs, params = _runs(rows + [{**r, "run_id": f"t{i}"} for i, r in enumerate(_tolerance_rows())])
    studies = axis_studies(runs, params, n_boot=0)
    assert [s.axis.name for s in studies] == ["num_gaussians", "tolerance"]
    paths = [p for s in studies for p in axis_figure(s, tmp_path / "figures")]
    assert sorted(p.name for p in paths) == [
        "error_vs_num_gaussians.png",
        "error_vs_num_gaussians.svg",
        "error_vs_tolerance.png",
        "error_vs_tolerance.svg",
    ]
    text = "\n".join(axes_section(studies))
    assert (
        "clipped to [0, 100] %" in text
        and "NFE (test_nfe_mean)" in text
        and "error = a·x^-b + c: b = " in text
    )
    csv = pacsv.read_csv(write_axes_csv(studies, tmp_path))
    assert csv.num_rows == 6 + 3 and set(csv.column("axis").to_pylist()) == {"num_gaussians", "tolerance"}


def test_six_tolerances_get_a_log_linear_slope_per_decade_whose_interval_holds_the_truth():
    rng = np.random.default_rng(1)
    rows = []
    for decade in range(1, 7):  # rtol 1e-1 .. 1e-6, error rises 0.5 points per decade looser
        for s in SEEDS:
            err = 0.10 - 0.005 * decade + rng.normal(0, 0.001)
            over = {"model.regime": "ode", "model.ode.rtol": 10.0**-decade, "train.seed": s}
            rows.append(_run(len(rows), **over, test_top1=1 - err, test_nfe_mean=6.0 * decade))
    runs, params = _runs(rows)
    (curve,) = axis_study(runs, params, axes_table()["tolerance"], n_boot=200, seed=0).curves
    t = curve.trend
    assert t.status == "ok" and t.kind == "log_linear_decade" and t.n_levels == 6
    assert t.ci[0] <= 0.005 <= t.ci[1] and t.ci[1] - t.ci[0] < 0.002
    assert curve.fixed == {"model.ode.atol": 1e-4}  # atol held fixed: part of the line, not of a level
