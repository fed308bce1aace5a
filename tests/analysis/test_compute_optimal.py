"""Compute-optimal scaling: the law E + A/N^α + B/D^β recovered from data drawn from it (or
refused on a design that cannot carry it), isoFLOP minima recovering N*(C) ∝ C^(β/(α+β)), the gap
between two mixers at matched compute and where their frontiers cross, and `analyze` end to end
on a real MLflow store (report section, compute_optimal.json, figures)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pytest
from compute_store import COMPUTE_STUDY, LAWS, write_compute_study
from scipy.optimize import brentq

from vitscale.analysis.pipeline import analyze
from vitscale.analysis.report.compute_optimal import compute_section
from vitscale.analysis.statistics.compute_optimal import compute_optimal
from vitscale.analysis.statistics.compute_points import ComputePoints, compute_points
from vitscale.analysis.statistics.data_law import NAMES, fit_data_law, law
from vitscale.analysis.statistics.frontier import CostModel, law_frontier
from vitscale.analysis.statistics.isoflop import isoflops

TRUTH = (0.05, 12.6, 6.3, 0.35, 0.3)  # E, A, B, α, β: both terms ~0.1 at N = D = 1e6
SIZES, LEVELS = np.geomspace(1e5, 1e7, 6), np.geomspace(1e5, 1e7, 3)
SIX_ND = CostModel(kappa=6.0, gamma=1.0)  # C = 6·N·D


def draw_runs(truth, rng, sizes=SIZES, levels=LEVELS, seeds=3, sigma=0.02) -> dict[str, np.ndarray]:
    """Every (size, data level) x seeds, error = law · exp(noise), C = 6·N·D."""
    n, d = (np.repeat(v.ravel(), seeds) for v in np.meshgrid(sizes, levels, indexing="ij"))
    err = law(np.asarray(truth), n, d) * np.exp(rng.normal(0, sigma, n.size))
    return {"n": n, "d": d, "c": 6 * n * d, "err": err}


def points(runs: dict[str, np.ndarray]) -> ComputePoints:
    ids = [str(i) for i in range(runs["n"].size)]
    return ComputePoints(**runs, run_ids=ids, d_source="images_seen", c_source="train_flops", n_without=0)


def runs_table(laws: dict[str, tuple], seed: int = 0) -> pa.Table:
    """A with_outcomes-like runs table: one mixer per law, discrete regime, images_seen and train_flops."""
    rng, rows = np.random.default_rng(seed), []
    for mixer, truth in laws.items():
        r = draw_runs(truth, rng)
        for i in range(r["n"].size):
            rows.append(
                {
                    "run_id": f"{mixer}-{i}",
                    "mixer": mixer,
                    "regime": "discrete",
                    "status": "FINISHED",
                    "stopped_early": False,
                    "did_not_train": False,
                    "used": True,
                    "params": r["n"][i],
                    "images_seen": r["d"][i],
                    "train_flops": r["c"][i],
                    "test_top1": 1 - r["err"][i],
                }
            )
    return pa.Table.from_pylist(rows)


def test_the_law_is_recovered_within_its_intervals_in_at_least_18_of_20_draws():
    inside = np.zeros(len(NAMES))
    for k in range(20):
        fit = fit_data_law(
            points(draw_runs(TRUTH, np.random.default_rng(1000 + k))), n_boot=100, seed=k, loso=False
        )
        assert fit.ok and fit.n_boot_ok == 100 and fit.bootstrap == "seeds"
        inside += [fit.ci[name][0] <= TRUTH[j] <= fit.ci[name][1] for j, name in enumerate(NAMES)]
    covered = dict(zip(NAMES, inside, strict=True))
    assert min(covered["alpha"], covered["beta"], covered["E"]) >= 18, covered


def test_a_fit_reports_dof_and_leave_one_size_out_error():
    fit = fit_data_law(points(draw_runs(TRUTH, np.random.default_rng(0))), n_boot=0)
    assert fit.ok and fit.n_cells == 18 and fit.dof == 13
    assert [r["params"] for r in fit.loso] == pytest.approx(list(SIZES))
    assert 0 < fit.loso_log_mae < 0.1 and 0 < fit.loso_rmse < 5  # 2 % noise: a few points at most
    assert fit.ci == {} and fit.draws is None


@pytest.mark.parametrize(
    ("sizes", "levels", "words"),
    [(SIZES[:5], LEVELS, "5 sizes and 3 data levels"), (SIZES, LEVELS[:2], "6 sizes and 2 data levels")],
)
def test_the_law_is_refused_on_five_sizes_or_two_data_levels(sizes, levels, words):
    fit = fit_data_law(points(draw_runs(TRUTH, np.random.default_rng(0), sizes, levels)), n_boot=50)
    assert fit.status == "refused" and words in fit.reason and ">= 6 distinct sizes" in fit.reason
    assert fit.E is None and fit.alpha is None and fit.ci == {} and fit.n_boot_ok == 0


def test_isoflop_minima_recover_the_compute_optimal_exponent():
    """With C = 6·N·D the optimum is N* ∝ C^(β/(α+β)); sizes and data levels dense enough that
    most budgets have an interior minimum. Ten seeded draws: the interval holds a in >= 8."""
    a, inside, estimates = TRUTH[4] / (TRUTH[3] + TRUTH[4]), 0, []
    for k in range(10):
        rng = np.random.default_rng(k)
        runs = draw_runs(TRUTH, rng, np.geomspace(1e4, 1e7, 10), np.geomspace(1e4, 1e8, 7))
        iso = isoflops(points(runs), n_boot=100, seed=k)
        assert iso.status == "ok" and iso.n_interior >= 4
        inside += iso.ci[0] <= a <= iso.ci[1]
        estimates.append(iso.a)
        interior = [m for m in iso.minima if not m.edge]
        assert all(m.sizes[0] < m.n_opt < m.sizes[-1] for m in interior)
        assert iso.minima[0].edge or iso.minima[-1].edge  # the extreme budgets see too few sizes
    assert inside >= 8 and abs(np.mean(estimates) - a) < 0.015, (inside, estimates)


def test_isoflops_need_sizes_that_share_a_compute_range():
    one_level = draw_runs(TRUTH, np.random.default_rng(0), SIZES, LEVELS[:1])
    iso = isoflops(points(one_level), n_boot=10)
    assert iso.status == "none" and iso.minima == [] and "no isoFLOP curve" in iso.reason


def _predictions(table: pa.Table, images: int, rng: np.random.Generator, skip: int = 0) -> pa.Table:
    """Per run `images` test images, right with probability its test top-1; the first `skip` runs none."""
    ids, top1 = table.column("run_id").to_pylist()[skip:], table.column("test_top1").to_pylist()[skip:]
    rows = []
    for run_id, p in zip(ids, top1, strict=True):
        correct = rng.random(images) < p
        rows += [
            {"run_id": run_id, "split": "test", "index": i, "correct": bool(c)} for i, c in enumerate(correct)
        ]
    return pa.Table.from_pylist(rows)


def test_the_bootstrap_redraws_test_images_where_every_run_has_them():
    table = runs_table({"attention": TRUTH})
    rows = np.arange(table.num_rows)
    pts = compute_points(table, rows, _predictions(table, 300, np.random.default_rng(0)))
    assert pts.scheme == "seeds+images" and pts.wrong.shape == (table.num_rows, 300)
    fit = fit_data_law(pts, n_boot=30, loso=False)
    assert fit.ok and fit.bootstrap == "seeds+images" and fit.n_boot_ok == 30
    without = fit_data_law(compute_points(table, rows, None), n_boot=30, loso=False)
    for name in ("alpha", "beta", "E"):  # the images add spread, never remove it
        width = fit.ci[name][1] - fit.ci[name][0]
        assert width >= 0.9 * (without.ci[name][1] - without.ci[name][0])
    partial = compute_points(table, rows, _predictions(table, 300, np.random.default_rng(0), skip=2))
    assert partial.scheme == "seeds" and "2 of 54 runs have no per-image predictions" in partial.image_note


def _gap(result, basis: str):
    return next(g for g in result.gaps if g.basis == basis)


def test_a_constant_gap_between_mixers_is_recovered_at_matched_compute():
    worse = (TRUTH[0] + 0.02, *TRUTH[1:])  # E two points higher: error*(C) two points higher everywhere
    result = compute_optimal(runs_table({"attention": TRUTH, "ssog": worse}), n_boot=100, seed=0)
    gap = _gap(result, "fitted law")
    assert (gap.candidate, gap.reference, gap.regime) == ("ssog", "attention", "discrete")
    measured = [r for r in gap.rows if not r.extrapolated]
    assert len(measured) >= 2 and (gap.rows[0].extrapolated or gap.rows[-1].extrapolated)
    for r in measured:
        assert r.low <= 0.02 <= r.high and abs(r.delta - 0.02) < 0.006
    assert gap.crossings == [] and "ssog above attention throughout" in gap.statement
    assert _gap(result, "envelope").crossings == []


def test_frontiers_that_cross_are_reported_crossing_near_the_true_compute():
    steeper = (0.04, 52.6, 26.3, 0.45, 0.4)  # worse at small compute, better at large
    result = compute_optimal(runs_table({"attention": TRUTH, "ssog": steeper}, seed=1), n_boot=100, seed=0)

    def true_delta(log_c: float) -> float:
        c = np.array([np.exp(log_c)])
        return float(
            law_frontier(np.array(steeper), SIX_ND, c)[0][0] - law_frontier(np.array(TRUTH), SIX_ND, c)[0][0]
        )

    crossing = brentq(true_delta, np.log(1e11), np.log(1e14))
    gap = _gap(result, "fitted law")
    assert len(gap.crossings) == 1 and gap.crossings[0]["resolved"]
    assert gap.crossings[0]["before"] == 1 and gap.crossings[0]["after"] == -1
    assert abs(np.log(gap.crossings[0]["budget"]) - crossing) < np.log(2)
    assert "resolved" in gap.statement and "above → below" in gap.statement


def test_without_compute_the_section_is_one_line_with_the_reason():
    table = runs_table({"attention": TRUTH}).drop_columns(["images_seen", "train_flops"])
    result = compute_optimal(table, n_boot=10)
    assert result.analysed == [] and "images seen" in result.reason
    lines = [x for x in compute_section(SimpleNamespace(compute=result)) if x]
    assert len(lines) == 2 and lines[1].startswith("Not analysed: no finished run has images seen")


def test_groups_of_one_size_and_one_data_level_get_one_line():
    table = runs_table({"attention": TRUTH, "ssog": TRUTH})
    one = np.asarray(table.column("params").to_pylist()) == SIZES[0]
    one &= np.asarray(table.column("images_seen").to_pylist()) == LEVELS[0]
    result = compute_optimal(table.filter(pa.array(one)), n_boot=10)
    assert len(result.analysed) == 2 and result.gaps == []
    lines = [x for x in compute_section(SimpleNamespace(compute=result)) if x]
    assert len(lines) == 2 and "attention · discrete 1 × 1, ssog · discrete 1 × 1" in lines[1]


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    root = tmp_path_factory.mktemp("compute")
    uri = f"sqlite:///{root / 'mlflow.db'}"
    write_compute_study(uri, root / "artifacts")
    res = analyze(COMPUTE_STUDY, uri, root / "report", n_boot=30, log_artifacts=False)
    return res


def test_analyze_writes_the_compute_section_the_json_and_the_figures(analysed, tmp_path):
    res = analysed
    report = res.report_path.read_text()
    assert "## Compute-optimal scaling" in report and "How to read it" in report
    assert "ssog · ode: refused: 3 sizes and 1 data levels" in report
    assert "mixed: 35 of 36 runs images_seen, the rest data.num_train x train.epochs" in report
    assert "ssog − attention (fitted law)" in report and "### isoFLOP minima" in report
    doc = json.loads(res.compute_path.read_text())
    groups = {(g["mixer"], g["regime"]): g for g in doc["groups"]}
    attention, ssog = groups[("attention", "discrete")], groups[("ssog", "discrete")]
    assert attention["bootstrap"] == "seeds (1 cell of one run held fixed)" and ssog["bootstrap"] == "seeds"
    assert attention["runs"] == 35 and attention["counts"]["n_failed"] == 1
    assert attention["law"]["status"] == "ok" and attention["law"]["dof"] == 18 - 5
    assert attention["C_source"] == "train_flops" and attention["D_source"] == "images_seen"
    assert groups[("ssog", "ode")]["law"]["status"] == "refused"
    gap = next(g for g in doc["gaps"] if g["basis"] == "fitted law")
    truth = LAWS["ssog"][0] - LAWS["attention"][0]
    assert any(r["low"] <= truth <= r["high"] for r in gap["rows"] if not r["extrapolated"])
    names = {p.name for p in res.figure_paths}
    assert {"compute_frontier.png", "isoflop_curves.png", "optimal_size.png", "compute_frontier.svg"} <= names
    assert "figures/compute_frontier.png" in report
    again = analyze(COMPUTE_STUDY, None, tmp_path, from_parquet=res.runs_path, n_boot=30)
    assert again.compute_path.read_text() == res.compute_path.read_text()
