"""Arms, seed-paired Δ, verdicts on test, incomplete-run policies, did-not-train runs and comparison
tuning records, analysed offline from snapshots built of in-memory runs (analysis_stores.fake_run)."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest
from analysis_stores import (
    COMPARISON_REFERENCE,
    COMPARISON_SPACE,
    comparison_trials,
    fake_run,
)
from scipy import stats

from vitscale.analysis.load.outcomes import outcome_counts
from vitscale.analysis.load.runs import StudyRuns, runs_to_table, write_snapshot
from vitscale.analysis.pipeline import analyze
from vitscale.analysis.statistics.paired import by_seed, paired_delta
from vitscale.errors import UserError
from vitscale.tracking import layout

ATT = np.array([0.801, 0.772, 0.815, 0.790, 0.808])
SSOG = np.array([0.829, 0.790, 0.851, 0.801, 0.838])


def _analyze(tmp_path: Path, runs: list, kind: str = "train", context: dict | None = None, **kw):
    table = runs_to_table(runs, "s", kind=kind)
    snap = write_snapshot(
        StudyRuns("s", kind, table, ["p1"], context=context or {}), tmp_path / "runs.parquet"
    )
    return analyze("s", out=tmp_path / "out", from_parquet=snap, n_boot=0, **kw)


def _run(n: int, mixer: str, seed: int, metrics: dict, dataset: str = "digits", **tags):
    cfg = {
        "model.mixer": mixer,
        "model.regime": "discrete",
        "model.width": 64,
        "train.seed": seed,
        "data.dataset": dataset,
        "data.resolution": 16,
        "model.patch_size": 4,
    }
    return fake_run(f"r{n:03d}", f"t{n:03d}", n, cfg, {"params": 1e5, **metrics}, **tags)


def test_paired_delta_is_the_t_interval_of_per_seed_differences():
    d = SSOG - ATT
    got = paired_delta(dict(enumerate(SSOG)), {**dict(enumerate(ATT)), 9: 0.5})  # seed 9: unpaired
    assert got.n == 5 and got.seeds == [0, 1, 2, 3, 4]
    assert got.mean == pytest.approx(d.mean())
    assert got.ci95 == pytest.approx(stats.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5))
    # pairing matters: the unpaired interval of the two means is much wider here
    assert got.ci95 < stats.t.ppf(0.975, 8) * math.sqrt(ATT.var(ddof=1) / 5 + SSOG.var(ddof=1) / 5) / 2
    assert by_seed([0, 0, 1], np.array([0.5, 0.7, np.nan])) == {0: pytest.approx(0.6)}


def test_study_delta_matches_a_hand_computation_on_validation_and_test(tmp_path):
    runs, n = [], 0
    for mixer, vals in (("attention", ATT), ("ssog", SSOG)):
        for seed, v in enumerate(vals):
            n += 1
            runs.append(
                _run(
                    n, mixer, seed, {"val_top1": v, "test_top1": v - 0.02 + 0.001 * seed * (mixer == "ssog")}
                )
            )
    res = _analyze(tmp_path, runs)
    (c,) = res.comparisons
    d = SSOG - ATT
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert c.val.mean == pytest.approx(d.mean()) and c.val.ci95 == pytest.approx(half)  # information
    dt = d + 0.001 * np.arange(5)
    half_t = stats.t.ppf(0.975, 4) * dt.std(ddof=1) / math.sqrt(5)
    assert c.test.t.mean == pytest.approx(dt.mean()) and c.test.t.ci95 == pytest.approx(half_t)
    # no per-image predictions: the verdict reads the seed-paired t test on test
    p_t = stats.ttest_1samp(dt, 0.0).pvalue
    assert c.test.boot is None and c.test.route == "t" and c.test.claim == "difference"
    assert c.test.p == pytest.approx(p_t) and c.test.p_holm == pytest.approx(p_t) and c.test.family == 1
    assert c.verdict == "better"
    report = res.report_path.read_text()
    row = (
        f"| ssog · discrete · 64 | attention · discrete · 64 | {100 * dt.mean():+.2f} ± {100 * half_t:.2f} "
        f"(n=5) | — (no per-image predictions) | {100 * d.mean():+.2f} ± {100 * half:.2f} (n=5) | 5 | — |"
    )
    assert row in report and "incomplete runs **dropped**" in report
    assert "| ±1 | better | 5/5 used | 5/5 used |" in report
    assert "No per-image predictions (older runs) for ssog · discrete · 64 − attention" in report
    with open(res.out_dir / "deltas.csv") as fh:
        (csv_row,) = list(csv.DictReader(fh))
    assert float(csv_row["test_delta_ci95"]) == pytest.approx(half_t) and csv_row["n_seeds"] == "5"
    assert float(csv_row["val_delta_ci95"]) == pytest.approx(half) and csv_row["verdict"] == "better"
    assert float(csv_row["p_holm"]) == pytest.approx(p_t) and csv_row["margin_points"] == "1"
    assert csv_row["arm_n_used"] == "5" and csv_row["reference_n_runs"] == "5"


def _fragile_study() -> list:
    """ssog fails on 3 of 6 seeds; on the seeds it survives it is 2 points better than attention."""
    runs, n = [], 0
    for seed in range(6):
        shift = 0.01 * seed
        n += 1
        runs.append(_run(n, "attention", seed, {"val_top1": 0.80 + shift, "test_top1": 0.79 + shift}))
        n += 1
        if seed < 3:
            tags = {layout.STATUS: "FAILED", layout.FAILURE_REASON: "diverged"}
            runs.append(_run(n, "ssog", seed, {"val_top1": 0.35}, **tags))  # an early epoch's value
        else:
            spread = 0.002 * (seed - 4)  # differences 0.018, 0.02, 0.022: they spread, mean 0.02
            val = 0.82 + shift + spread
            runs.append(_run(n, "ssog", seed, {"val_top1": val, "test_top1": val - 0.01}))
    return runs


@pytest.mark.parametrize("policy", ["drop", "chance"])
def test_an_arm_that_fails_more_often_is_not_reported_as_better(tmp_path, policy):
    res = _analyze(tmp_path, _fragile_study(), incomplete=policy)
    (c,) = res.comparisons
    ssog = next(a for a in res.arms if a.label.startswith("ssog"))
    assert ssog.counts["n_failed"] == 3 and ssog.counts["n_runs"] == 6
    assert c.verdict != "better"
    report = res.report_path.read_text()
    assert "3/6 used, 3 failed" in report
    if policy == "drop":  # the 3 survivors look better on test, but the verdict names the lost runs
        assert c.test.t.n == 3 and c.test.t.mean == pytest.approx(0.02)
        assert c.test.verdict == "better"  # what the statistics alone say
        assert c.verdict.startswith("not established: ssog · discrete · 64 lost 3/6 runs")
        assert "**dropped**" in report
    else:  # failed seeds score chance (digits: 1/10)
        expected = np.mean([0.1 - (0.79 + 0.01 * s) for s in range(3)] + [0.02] * 3)
        assert c.test.t.n == 6 and c.test.t.mean == pytest.approx(expected)
        assert ssog.stats["test_top1"][2] == 6 and "**scored as chance**" in report


def test_did_not_train_runs_are_tagged_derived_and_counted(tmp_path):
    runs = [
        _run(1, "attention", 0, {"val_top1": 0.85}, **{layout.DID_NOT_TRAIN: "false"}),
        _run(2, "attention", 1, {"val_top1": 0.30}, **{layout.DID_NOT_TRAIN: "true"}),  # tag wins
        _run(3, "ssog", 0, {"val_top1": 0.11}),  # untagged, digits: within 2 points of 1/10
        _run(4, "ssog", 1, {"val_top1": 0.90}),  # untagged, trained
        _run(5, "ssog", 2, {"val_top1": 0.10}, dataset="imagefolder"),  # unknown classes: unknown
    ]
    res = _analyze(tmp_path, runs)
    assert res.runs.column("did_not_train").to_pylist() == [False, True, True, False, None]
    assert res.counts()["did_not_train"] == 2
    arms = {a.label.split(" ")[0]: a for a in res.arms}
    assert arms["attention"].counts["n_did_not_train"] == 1
    assert arms["ssog"].counts["n_did_not_train"] == 1  # the best digits config; run 5 is another config
    assert outcome_counts(res.runs, [4])["n_did_not_train_unknown"] == 1
    agg = {r["mixer"]: r for r in res.aggregates.to_pylist()}
    assert (
        agg["attention"]["n_did_not_train"] == 1 and agg["attention"]["val_top1_n"] == 2
    )  # kept in the mean
    report = res.report_path.read_text()
    assert "2/2 used, 1 did not train" in report
    assert "| t002 | attention | discrete | 64 | 16 | 1 | FINISHED | False | True | — |" in report
    assert "| t004 |" not in report


def test_comparison_arms_reference_budget_tuned_config_and_edges(tmp_path):
    runs = [
        fake_run(
            t["trial"], t["trial"], i, t["params"], t["metrics"], **{layout.STATUS: t["status"], **t["tags"]}
        )
        for i, t in enumerate(comparison_trials())
    ]
    context = {"reference": COMPARISON_REFERENCE, "space": COMPARISON_SPACE}
    res = _analyze(tmp_path, runs, kind="comparison", context=context)
    assert res.comparison and [a.label for a in res.arms] == [
        "model.mixer=attention,model.regime=discrete",
        "model.mixer=attention,model.regime=ode",
        "model.mixer=ssog,model.regime=discrete",
        "model.mixer=ssog,model.regime=ode",
    ]
    comparisons = {c.candidate: c for c in res.comparisons}
    assert len(comparisons) == 2  # ssog vs attention per regime
    disc = comparisons["model.mixer=ssog,model.regime=discrete"]
    assert disc.reference == "model.mixer=attention,model.regime=discrete" and disc.test.t.n == 4
    assert disc.test.t.mean == pytest.approx(0.03, abs=0.004) and disc.verdict == "better"
    assert disc.val.mean == pytest.approx(0.03, abs=0.004)  # beside it, as information
    ode = comparisons["model.mixer=ssog,model.regime=ode"]
    assert ode.reference == "model.mixer=attention,model.regime=ode"
    assert ode.test.t.mean == pytest.approx(-0.01, abs=0.004) and ode.verdict == "worse"
    assert disc.test.family == ode.test.family == 2  # Holm across the report's two comparisons
    arms = {a.label: a for a in res.arms}
    ssog_ode = arms["model.mixer=ssog,model.regime=ode"].tuning
    assert ssog_ode["budget"] == {
        "n_runs": 4,
        "n_used": 2,
        "n_failed": 1,
        "n_stopped_early": 1,
        "n_killed": 0,
        "n_other": 0,
        "n_did_not_train": 0,
        "n_did_not_train_unknown": 0,
    }
    ssog_disc = arms["model.mixer=ssog,model.regime=discrete"].tuning
    assert ssog_disc["tuned"] == {"model.ssog.num_gaussians": 8, "train.lr": 0.01}
    assert {k: e.side for k, e in ssog_disc["edges"].items()} == {
        "model.ssog.num_gaussians": "upper",
        "train.lr": "upper",
    }
    attention_ode = arms["model.mixer=attention,model.regime=ode"].tuning
    assert attention_ode["tuned"] == {"train.lr": 0.002} and attention_ode["edges"] == {}  # K: ssog only
    assert all(f.counts["n_runs"] == 4 for f in res.fits)  # fits read the final phase only
    report = res.report_path.read_text()
    assert (
        "⚠ model.ssog.num_gaussians=8 within 5% of upper edge 8, ⚠ train.lr=0.01 within 5% of upper edge 0.01"
        in report
    )
    assert "## Does the low-fidelity ranking transfer?" not in report  # tuned at full fidelity
    assert "2/4 used, 1 failed, 1 stopped early" in report
    assert "(model.mixer=attention)" in report and "Comparison study" in report
    assert "## Top-1 by regime and width" not in report  # its best-config cells mix in tuning runs


def test_a_comparison_tuned_at_a_fidelity_without_confirmation_says_the_transfer_is_not_shown(tmp_path):
    runs = [
        fake_run(
            t["trial"], t["trial"], i, t["params"], t["metrics"], **{layout.STATUS: t["status"], **t["tags"]}
        )
        for i, t in enumerate(comparison_trials())
    ]
    context = {"reference": COMPARISON_REFERENCE, "space": COMPARISON_SPACE, "fidelity": {"train.epochs": 1}}
    report = _analyze(tmp_path, runs, kind="comparison", context=context).report_path.read_text()
    assert "tuned at low fidelity (train.epochs=1) and no tuning point was re-run" in report
    assert "holds at full fidelity is **not shown**" in report


def test_an_unknown_policy_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="--incomplete: 'zero' is not one of drop, chance"):
        _analyze(tmp_path, _fragile_study(), incomplete="zero")


def test_cli_prints_each_delta_with_its_policy(tmp_path, capsys):
    from vitscale.cli import main

    table = runs_to_table(_fragile_study(), "s", kind="train")
    snap = write_snapshot(StudyRuns("s", "train", table, ["p1"]), tmp_path / "runs.parquet")
    main(
        [
            "analyze",
            "s",
            "--from",
            str(snap),
            "--out",
            str(tmp_path / "o"),
            "--incomplete",
            "chance",
            "--bootstrap",
            "0",
        ]
    )
    out = capsys.readouterr().out
    assert "Verdicts on test (margin ±1 point, incomplete runs: chance):" in out
    assert "ssog · discrete · 64 − attention · discrete · 64: " in out
    assert "  Δ test -" in out and "(t, n=6 seeds)" in out and "information only" in out
    assert "3 failed" in out and all(len(line) <= 80 for line in out.splitlines() if "Δ" in line)


def test_no_verdict_or_interval_from_two_seeds_or_from_identical_differences():
    from vitscale.analysis.statistics.contest import Pair, judge

    two = judge([Pair({0: 0.85, 1: 0.86}, {0: 0.80, 1: 0.80})], margin=0.01)[0]
    assert two.verdict.startswith("undecided (n=2 seeds") and math.isnan(two.t.ci95) and not two.claim
    same = judge([Pair({0: 0.828, 1: 0.838, 2: 0.848}, {0: 0.80, 1: 0.81, 2: 0.82})], margin=0.01)[0]
    assert same.verdict.startswith("undecided (n=3: every seed gives the same Δ")
    spread = Pair({0: 0.85, 1: 0.86, 2: 0.875}, {0: 0.80, 1: 0.81, 2: 0.82})
    assert judge([spread], margin=0.01)[0].verdict == "better"
    tiny = Pair({0: 0.8001, 1: 0.8098, 2: 0.8202}, {0: 0.80, 1: 0.81, 2: 0.82})
    assert judge([tiny], margin=0.01)[0].verdict == "equivalent within ±1"  # never "no clear difference"
