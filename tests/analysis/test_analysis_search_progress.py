"""Best-so-far against compute: a comparison's tuning trials per arm, analysed offline from a snapshot
(analysis_stores.fake_run), with the report's numbers checked by hand."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from analysis_stores import fake_run
from scipy import stats

from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.tracking import layout

ARM_A = "model.mixer=attention,model.regime=discrete"
ARM_B = "model.mixer=ssog,model.regime=ode"
# (arm, start time, val_top1 (nan: failed), train_flops), in a shuffled order: start time orders them
TRIALS = (
    (ARM_B, 2, 0.615, 2e9),
    (ARM_A, 1, 0.50, 1e9),
    (ARM_A, 3, np.nan, 2e9),
    (ARM_B, 4, 0.62, 2e9),
    (ARM_A, 5, 0.70, 1e9),
    (ARM_B, 6, 0.61, 2e9),
    (ARM_A, 7, 0.65, 1e9),
)
SEARCHER = {"algorithm": "tpe", "sampler_seed": 0, "scheduler": "fifo", "objective": None}


def _runs(trials=TRIALS, parent: str = "p1", prefix: str = "") -> list:
    runs = []
    for n, (arm, start, val, flops) in enumerate(trials):
        mixer, regime = (v.split("=")[1] for v in arm.split(","))
        cfg = {
            "model.mixer": mixer,
            "model.regime": regime,
            "model.width": 16,
            "train.seed": 0,
            "train.lr": n,
        }
        metrics = {"params": 1e5, "train_flops": flops, **({} if np.isnan(val) else {"val_top1": val})}
        status = "FAILED" if np.isnan(val) else "FINISHED"
        tags = {layout.PHASE: "tune", layout.ARM: arm, layout.STATUS: status, layout.KIND: "comparison"}
        tags[layout.PARENT_RUN_ID] = parent
        runs.append(fake_run(f"{prefix}r{n}", f"{prefix}t{n}", start, cfg, metrics, **tags))
    return runs


def _analyze(tmp_path: Path, searcher: dict | None, runs: list | None = None, searchers: dict | None = None):
    table = runs_to_table(runs or _runs(), "s", kind="comparison")
    context = {"searcher": searcher} if searcher else {}
    if searchers:
        context["searchers"] = searchers
    snap = write_snapshot(
        StudyRuns("s", "comparison", table, ["p1"], context=context), tmp_path / "runs.parquet"
    )
    return analyze("s", out=tmp_path / "out", from_parquet=snap, n_boot=0)


def test_best_so_far_per_arm_is_monotone_and_the_table_matches_a_hand_count(tmp_path):
    res = _analyze(tmp_path, SEARCHER)
    lines = {ln.arm: ln for ln in res.search_lines}
    assert set(lines) == {ARM_A, ARM_B} and res.search_metric == "val_top1"
    a, b = lines[ARM_A], lines[ARM_B]
    # start order 1, 3, 5, 7: the failed trial spends compute and keeps the best
    assert a.x.tolist() == [1e9, 3e9, 4e9, 5e9]
    assert a.best.tolist() == pytest.approx([0.50, 0.50, 0.70, 0.70])
    assert b.best.tolist() == pytest.approx([0.615, 0.62, 0.62])
    for ln in (a, b):
        assert np.all(np.diff(ln.best) >= 0)
    assert a.compute_to_reach() == 4e9  # 0.70 first reached at 4 G
    assert b.compute_to_reach() == 2e9  # 0.615 is within 1 % of 0.62: the first trial already
    report = res.report_path.read_text()
    assert "## Search progress: best-so-far against compute" in report
    # searcher · arm | seeds | trials | compute per seed | equal compute | best there | vs tpe | final | to 99 %
    assert "| tpe · attention · discrete | 1 | 4 | 5 G | 5 G | 70.00 | reference | 70.00 | 4 G |" in report
    assert "| tpe · ssog · ode | 1 | 3 | 6 G | 6 G | 62.00 | reference | 62.00 | 2 G |" in report
    assert report.count("search_progress.png") == 1  # in its section, not again under Figures
    assert (res.out_dir / "figures" / "search_progress.png").stat().st_size > 10_000


def test_grid_studies_and_unrecorded_searchers_get_no_search_progress(tmp_path):
    for i, searcher in enumerate(({**SEARCHER, "algorithm": "grid"}, None)):
        res = _analyze(tmp_path / str(i), searcher)
        assert res.search_lines == [] and res.search_figures == []
        assert "Search progress" not in res.report_path.read_text()


def test_a_grid_started_pbt_searches(tmp_path):
    res = _analyze(tmp_path, {**SEARCHER, "algorithm": "grid", "scheduler": "pbt"})
    assert sorted(ln.searcher for ln in res.search_lines) == ["grid+pbt", "grid+pbt"]


def test_a_minimised_objective_keeps_the_lowest_and_pbt_names_the_scheduler(tmp_path):
    searcher = {**SEARCHER, "scheduler": "pbt", "objective": {"metric": "val_top1", "mode": "min"}}
    res = _analyze(tmp_path, searcher)
    a = next(ln for ln in res.search_lines if ln.arm == ARM_A)
    assert a.searcher == "tpe+pbt" and a.best.tolist() == pytest.approx([0.50, 0.50, 0.50, 0.50])
    # members train side by side: none has its final score before the population spent its compute
    assert a.x.tolist() == [a.x[-1]] * 4 and a.compute_to_reach() == a.x[-1]


# Four executions of one study on arm A: tpe and gp, sampler seeds 0 and 1 (each its own parent run).
# (start, val_top1, train_flops) per execution; equal compute is the least any line spent: 3 G.
EXECUTIONS = {
    ("p-tpe0", "tpe", 0): ((1, 0.60, 1e9), (2, 0.70, 1e9), (3, 0.72, 1e9)),
    ("p-tpe1", "tpe", 1): ((1, 0.66, 1e9), (2, 0.64, 1e9), (3, 0.68, 1e9), (4, 0.90, 1e9)),
    ("p-gp0", "gp", 0): ((1, 0.75, 1e9), (2, 0.74, 1e9), (3, 0.80, 1e9)),
    ("p-gp1", "gp", 1): ((1, 0.70, 1.5e9), (2, 0.82, 1.5e9)),
}


def test_executions_with_other_searchers_and_seeds_are_compared_with_tpe_at_equal_compute(tmp_path):
    runs, searchers = [], {}
    for (parent, name, seed), trials in EXECUTIONS.items():
        runs += _runs(tuple((ARM_A, *t) for t in trials), parent, prefix=parent)
        searchers[parent] = {"algorithm": name, "sampler_seed": seed, "scheduler": "fifo"}
    res = _analyze(tmp_path, SEARCHER, runs, searchers)
    assert sorted((ln.searcher, ln.sampler_seed) for ln in res.search_lines) == [
        ("gp", 0),
        ("gp", 1),
        ("tpe", 0),
        ("tpe", 1),
    ]
    tpe, gp = res.search_summaries  # the reference first
    assert (tpe.searcher, gp.searcher, tpe.seeds, gp.seeds) == ("tpe", "gp", 2, 2)
    assert tpe.equal_compute == gp.equal_compute == 3e9  # gp seed 1 spent 3 G, the least
    # best at 3 G: tpe 0.72 and 0.68 (its 0.90 came at 4 G), gp 0.80 and 0.82
    assert tpe.at_equal[0] == pytest.approx(0.70) and gp.at_equal[0] == pytest.approx(0.81)
    assert tpe.final[0] == pytest.approx(0.81)  # at the lines' ends: 0.72 and 0.90
    diff, half = gp.versus
    assert diff == pytest.approx(0.11)
    # Welch: variances 0.0008/2 and 0.0002/2, df = 0.0005^2 / (0.0004^2 + 0.0001^2) = 1.47
    se = np.sqrt(0.0008 / 2 + 0.0002 / 2)
    assert half == pytest.approx(stats.t.ppf(0.975, 0.0005**2 / (0.0004**2 + 0.0001**2)) * se)
    assert tpe.versus is None
    report = res.report_path.read_text()
    assert "| tpe · attention · discrete | 2 | 3.5 | 3.5 G | 3 G | 70.00 ± 25.41 | reference |" in report
    assert (
        f"| gp · attention · discrete | 2 | 2.5 | 3 G | 3 G | 81.00 ± 12.71 | +11.00 [{100 * (diff - half):+.2f}"
        in report
    )
