"""Arms, seed-paired Δ, incomplete-run policies, did-not-train runs and comparison tuning records,
analysed offline from snapshots built of in-memory runs (analysis_stores.fake_run)."""

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

from vitscale.analysis.outcomes import outcome_counts
from vitscale.analysis.paired import by_seed, paired_delta
from vitscale.analysis.pipeline import analyze
from vitscale.analysis.runs import StudyRuns, runs_to_table
from vitscale.analysis.snapshot import write_snapshot
from vitscale.analysis.tuning import edge
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
    deltas = {d.metric: d for d in res.deltas}
    d = SSOG - ATT
    half = stats.t.ppf(0.975, 4) * d.std(ddof=1) / math.sqrt(5)
    assert deltas["val_top1"].delta.mean == pytest.approx(d.mean())
    assert deltas["val_top1"].delta.ci95 == pytest.approx(half) and deltas["val_top1"].verdict == "better"
    dt = d + 0.001 * np.arange(5)
    assert deltas["test_top1"].delta.mean == pytest.approx(dt.mean())
    assert deltas["test_top1"].delta.ci95 == pytest.approx(
        stats.t.ppf(0.975, 4) * dt.std(ddof=1) / math.sqrt(5)
    )
    report = res.report_path.read_text()
    row = f"| ssog · discrete · 64 | attention · discrete · 64 | {100 * d.mean():+.2f} ± {100 * half:.2f} (n=5) |"
    assert row in report and "incomplete runs **dropped**" in report
    with open(res.out_dir / "deltas.csv") as fh:
        rows = {r["metric"]: r for r in csv.DictReader(fh)}
    assert float(rows["val_top1"]["delta_ci95"]) == pytest.approx(half) and rows["val_top1"]["n_pairs"] == "5"


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
            runs.append(_run(n, "ssog", seed, {"val_top1": 0.82 + shift + spread, "test_top1": 0.81 + shift}))
    return runs


@pytest.mark.parametrize("policy", ["drop", "chance"])
def test_an_arm_that_fails_more_often_is_not_reported_as_better(tmp_path, policy):
    res = _analyze(tmp_path, _fragile_study(), incomplete=policy)
    val = next(d for d in res.deltas if d.metric == "val_top1")
    ssog = next(a for a in res.arms if a.label.startswith("ssog"))
    assert ssog.counts["n_failed"] == 3 and ssog.counts["n_runs"] == 6
    assert val.verdict != "better"
    report = res.report_path.read_text()
    assert "3/6 used, 3 failed" in report
    if policy == "drop":  # the 3 survivors look better, but the verdict names the lost runs
        assert val.delta.n == 3 and val.delta.mean == pytest.approx(0.02)
        assert val.verdict.startswith("not established: ssog · discrete · 64 lost 3/6 runs")
        assert "**dropped**" in report
    else:  # failed seeds score chance (digits: 1/10)
        expected = np.mean([0.1 - (0.80 + 0.01 * s) for s in range(3)] + [0.02] * 3)
        assert val.delta.n == 6 and val.delta.mean == pytest.approx(expected)
        assert ssog.stats["val_top1"][2] == 6 and "**scored as chance**" in report


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
    deltas = {(d.candidate, d.metric): d for d in res.deltas}
    assert len(deltas) == 4  # ssog vs attention per regime, on val and test
    disc = deltas[("model.mixer=ssog,model.regime=discrete", "val_top1")]
    assert disc.reference == "model.mixer=attention,model.regime=discrete" and disc.delta.n == 4
    assert disc.delta.mean == pytest.approx(0.03, abs=0.004) and disc.verdict == "better"
    ode = deltas[("model.mixer=ssog,model.regime=ode", "test_top1")]
    assert ode.reference == "model.mixer=attention,model.regime=ode" and ode.delta.mean == pytest.approx(
        -0.01, abs=0.004
    )
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
    assert ssog_disc["edges"] == {"model.ssog.num_gaussians": "high", "train.lr": "high"}
    attention_ode = arms["model.mixer=attention,model.regime=ode"].tuning
    assert attention_ode["tuned"] == {"train.lr": 0.002} and attention_ode["edges"] == {}  # K: ssog only
    assert all(f.counts["n_runs"] == 4 for f in res.fits)  # fits read the final phase only
    report = res.report_path.read_text()
    assert "⚠ model.ssog.num_gaussians (high), ⚠ train.lr (high)" in report
    assert "2/4 used, 1 failed, 1 stopped early" in report
    assert "(model.mixer=attention)" in report and "Comparison study" in report
    assert "## Top-1 by regime and width" not in report  # its best-config cells mix in tuning runs


def test_edges_of_each_kind_of_range():
    assert edge(1e-2, {"loguniform": [1e-4, 1e-2]}) == "high"
    assert edge(1.2e-4, {"loguniform": [1e-4, 1e-2]}) == "low"  # within 5 % of the log range
    assert edge(1e-3, {"loguniform": [1e-4, 1e-2]}) is None
    assert edge(0.5, {"uniform": [0.0, 1.0]}) is None and edge(0.97, {"uniform": [0.0, 1.0]}) == "high"
    assert edge(1, {"int": [1, 8]}) == "low" and edge(4, {"int": [1, 8]}) is None
    assert edge(64, {"choice": [128, 32, 64]}) is None and edge(128, {"grid": [128, 32, 64]}) == "high"
    assert edge("ssog", {"choice": ["attention", "ssog"]}) is None  # categorical: no edge


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
    assert "Δ val top-1 ssog · discrete · 64 − attention · discrete · 64: -" in out
    assert "n=6" in out and "incomplete runs: chance" in out and "3 failed" in out


def test_no_verdict_from_two_seeds_or_from_identical_differences():
    from vitscale.analysis.arms import Arm, verdict
    from vitscale.analysis.paired import PairedDelta

    arm = Arm("a", {}, [], counts={"n_runs": 3, "n_used": 3})
    assert verdict(PairedDelta(0.05, 0.01, 2, [0, 1]), arm, arm, "drop").startswith("undecided (n=2")
    assert verdict(PairedDelta(0.028, 0.0, 3, [0, 1, 2]), arm, arm, "drop").startswith(
        "undecided (n=3: every"
    )
    assert verdict(PairedDelta(0.0, 0.0, 3, [0, 1, 2]), arm, arm, "drop") == "no clear difference"
    assert verdict(PairedDelta(0.05, 0.01, 3, [0, 1, 2]), arm, arm, "drop") == "better"
