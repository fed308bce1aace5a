"""analyze against a real SQLite MLflow store written in the tracking layout, and from its snapshot."""

from __future__ import annotations

import math
import socket
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest
from analysis_stores import BENCH_STUDY, COMPARISON_REFERENCE, COMPARISON_STUDY, TRAIN_STUDY, bench_truth

from vitscale.analysis.load import runs as runs_mod
from vitscale.analysis.pipeline import analyze


def _analyze_both(study: str, uri: str, root: Path):
    """From MLflow, then from its runs.parquet with the MLflow reader made unusable."""
    from_mlflow = analyze(study, uri, root / "mlflow", n_boot=40)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(runs_mod, "load_study_runs", lambda *a, **k: pytest.fail("MLflow was contacted"))
        from_parquet = analyze(
            study, None, root / "parquet", from_parquet=root / "mlflow" / "runs.parquet", n_boot=40
        )
    return from_mlflow, from_parquet


@pytest.fixture(scope="module")
def train(stores, tmp_path_factory):
    return _analyze_both(TRAIN_STUDY, stores["uri"], tmp_path_factory.mktemp("train"))


@pytest.fixture(scope="module")
def bench(stores, tmp_path_factory):
    return _analyze_both(BENCH_STUDY, stores["uri"], tmp_path_factory.mktemp("bench"))


@pytest.fixture(scope="module")
def comparison(stores, tmp_path_factory):
    return _analyze_both(COMPARISON_STUDY, stores["uri"], tmp_path_factory.mktemp("comparison"))


@pytest.mark.parametrize("which", ["train", "bench", "comparison"])
def test_mlflow_and_parquet_give_the_same_outputs(which, request):
    a, b = request.getfixturevalue(which)
    assert a.logged_to == a.parent_run_ids[0] and b.logged_to is None
    files_a = sorted(p.relative_to(a.out_dir).as_posix() for p in a.out_dir.rglob("*") if p.is_file())
    files_b = sorted(p.relative_to(b.out_dir).as_posix() for p in b.out_dir.rglob("*") if p.is_file())
    assert files_a == files_b
    csvs = [f for f in files_a if f.endswith(".csv")]
    prefixes = ("pareto_", "crossovers", "arms", "deltas", "importance", "transfer")
    assert csvs and all(f.startswith(prefixes) for f in csvs)
    for name in [*csvs, "fits.json", "report.md"]:
        assert (a.out_dir / name).read_text() == (b.out_dir / name).read_text(), name
    assert pq.read_table(a.runs_path).to_pandas().equals(pq.read_table(b.runs_path).to_pandas())  # NaN == NaN


def test_runs_table_layout_types_and_resume_dedupe(train):
    t = train[0].runs
    assert t.num_rows == 24 and len(set(t.column("trial_id").to_pylist())) == 24
    assert len(train[0].parent_run_ids) == 2
    schema = t.schema
    for name, typ in [
        ("run_id", pa.string()),
        ("stopped_early", pa.bool_()),
        ("model.width", pa.int64()),
        ("train.lr", pa.float64()),
        ("model.ssog.offsets", pa.bool_()),
        ("val_top1", pa.float64()),
        ("model.mixer", pa.string()),
        ("train.seed", pa.int64()),
    ]:
        assert schema.field(name).type == typ, name
    assert t.column("model.ode.step_size").null_count == 24
    resumed = t.filter(pc.equal(t.column("trial_id"), "t_00001"))
    assert resumed.column("node_id").to_pylist() == ["node-b"]  # the newer parent's run
    assert resumed.column("parent_run_id").to_pylist() == [train[0].parent_run_ids[0]]


def test_failed_and_stopped_trials_are_counted_not_averaged(train):
    agg = train[0].aggregates
    rows = {(r["mixer"], r["regime"], r["width"]): r for r in agg.to_pylist()}
    early = rows[("attention", "discrete", 96)]
    assert (early["n_runs"], early["n_used"], early["n_stopped_early"], early["val_top1_n"]) == (2, 1, 1, 1)
    failed = rows[("ssog", "ode", 32)]
    assert (failed["n_failed"], failed["n_used"], failed["failure_reasons"]) == (1, 1, "diverged")
    full = rows[("ssog", "discrete", 64)]
    assert full["val_top1_n"] == 2 and full["val_top1_ci95"] > 0
    report = train[0].report_path.read_text()
    assert "| t_00020 | ssog | ode | 32 |" in report and "diverged" in report
    assert "| t_00006 | attention | discrete | 96 |" in report


def test_train_report_has_the_paper_table_fronts_fits_and_figures(train):
    res = train[0]
    report = res.report_path.read_text()
    assert (
        "| regime | width | attention top-1 (%) | attention params | ssog top-1 (%) | ssog params |" in report
    )
    paper_rows = [line for line in report.splitlines() if line.startswith(("| discrete | ", "| ode | "))][:6]
    assert len(paper_rows) == 6 and all(row.split("|")[7].strip().startswith("+") for row in paper_rows)
    assert all(row.split("|")[8].strip().startswith("-1") for row in paper_rows)  # ~12 % fewer params
    for name in ("params_val_top1", "flops_per_image_val_top1", "nfe_mean_val_top1"):
        assert f"(pareto_{name}.csv)" in report and res.front_paths[name].is_file()
    nfe = pacsv.read_csv(res.front_paths["nfe_mean_val_top1"])
    assert set(nfe.column("regime").to_pylist()) == {"ode"} and "run_ids" in nfe.column_names
    # 3 widths: a 3-parameter law would pass through every size mean, so nothing is fitted
    assert [f.status for f in res.fits] == ["not_fitted"] * 4 and all(f.ci == {} for f in res.fits)
    assert "- attention · discrete: not fitted: 3 sizes" in report
    assert "| mixer | regime | b |" not in report
    for png in (p for p in res.figure_paths if p.suffix == ".png"):
        assert f"(figures/{png.name})" in report


def test_analysis_is_logged_to_the_newest_parent_run(train, stores):
    from mlflow import MlflowClient

    client = MlflowClient(stores["uri"])
    listed = {a.path for a in client.list_artifacts(train[0].logged_to, "analysis")}
    assert {"analysis/report.md", "analysis/fits.json", "analysis/runs.parquet", "analysis/figures"} <= listed


def test_bench_crossovers_ratios_oom_and_cost_exponents(bench):
    res = bench[0]
    cross = {(c.regime, c.baseline, c.metric): c for c in res.crossovers}
    c = cross[("discrete", "attention/sdpa", "images_per_second")]
    r0 = bench_truth("ssog", "", "discrete", 224)[0] / bench_truth("attention", "sdpa", "discrete", 224)[0]
    r1 = bench_truth("ssog", "", "discrete", 384)[0] / bench_truth("attention", "sdpa", "discrete", 384)[0]
    t = math.log(r0) / (math.log(r0) - math.log(r1))
    assert c.status == "crosses" and (c.below, c.above) == (224, 384)  # 2 % behind at 224: beyond 1 %
    assert c.verdicts == "224 behind · 384 ahead · 512 ahead · 768 ahead"
    assert c.resolution == pytest.approx(math.exp(math.log(224) + t * math.log(384 / 224)))
    assert cross[("discrete", "attention/math", "images_per_second")].status == "ahead_throughout"
    assert cross[("ode", "attention/math", "images_per_second")].largest == 512  # 768 went out of memory
    slopes = {(e["series"], e["regime"], e["quantity"], e["method"]): e["slope"] for e in res.cost_exponents}
    assert len(slopes) == len(res.cost_exponents)  # one row per estimate: 4 resolutions, ols and local
    assert {e["method"] for e in res.cost_exponents} == {"ols", "local"}
    assert slopes[("ssog", "discrete", "flops_per_image", "ols")] == pytest.approx(1.5)
    assert slopes[("attention/sdpa", "discrete", "flops_per_image", "ols")] == pytest.approx(2.0)
    # the mixer's own FLOPs, counted from each configuration (width 192, 3 heads, patch 16, K=4)
    assert slopes[("ssog", "discrete", "mixing_flops", "local")] == pytest.approx(1.5, abs=0.03)
    assert slopes[("attention/math", "ode", "mixing_flops", "local")] == pytest.approx(2.0, abs=0.03)
    assert slopes[("ssog", "discrete", "mixing_flops", "ols")] == pytest.approx(1.5)  # exactly N·(H+W)
    report = res.report_path.read_text()
    assert "| ode | 768 | 2304 | oom | oom |" in report
    assert "ssog/attention/sdpa throughput" in report and "## Crossover resolutions" in report
    assert (
        "| ssog | discrete | — | mixer FLOPs / layer (mixing_flops) | local, two largest resolutions | 1.5"
        in report
    )
    fastest = pacsv.read_csv(res.front_paths["resolution_images_per_second"])
    top = {(r["regime"], r["resolution"]): r["series"] for r in fastest.to_pylist()}
    assert top[("discrete", 768)] == "ssog" and top[("discrete", 224)] == "attention/sdpa"
    assert {p.name for p in res.figure_paths} >= {"throughput_vs_resolution.png", "memory_vs_resolution.svg"}


def test_search_follows_page_tokens(stores, monkeypatch):
    monkeypatch.setattr(runs_mod, "PAGE_SIZE", 5)
    got = runs_mod.load_study_runs(TRAIN_STUDY, stores["uri"])
    assert got.table.num_rows == 24


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _cli(argv: list[str], capsys) -> tuple[int, str, str]:
    from vitscale.cli import main

    with pytest.raises(SystemExit) as exc:
        main(argv)
    out = capsys.readouterr()
    return exc.value.code, out.out, out.err


def test_cli_missing_study_unreachable_server_and_missing_store(stores, tmp_path, capsys):
    code, _, err = _cli(
        ["analyze", "no_such_study", "--tracking-uri", stores["uri"], "--out", str(tmp_path)], capsys
    )
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "no_such_study" in err and stores["uri"] in err and "vitscale study run" in err
    uri = f"http://127.0.0.1:{_free_port()}"
    code, _, err = _cli(["analyze", TRAIN_STUDY, "--tracking-uri", uri], capsys)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and f"cannot reach the MLflow server at {uri}" in err
    )
    missing = tmp_path / "nothing.db"
    spec = tmp_path / "study.yaml"
    spec.write_text(f"name: {TRAIN_STUDY}\ntracking:\n  uri: sqlite:///{missing}\n")
    code, _, err = _cli(["analyze", str(spec)], capsys)
    assert code == 2 and f"sqlite:///{missing}" in err and not missing.exists()


def test_cli_redraws_from_the_snapshot(bench, tmp_path, capsys):
    from vitscale.cli import main

    main(["analyze", BENCH_STUDY, "--from", str(bench[0].runs_path), "--out", str(tmp_path)])
    out = capsys.readouterr().out
    assert "attention/sdpa" in out and "report:" in out and (tmp_path / "report.md").is_file()
    assert (tmp_path / "report.md").read_text() == bench[0].report_path.read_text()
    assert "logged to MLflow" not in out


def test_comparison_reads_reference_and_space_from_the_parent_run(comparison):
    res, redrawn = comparison
    assert res.comparison and res.reference == COMPARISON_REFERENCE
    assert redrawn.reference == COMPARISON_REFERENCE  # kept in runs.parquet's metadata
    arms = {a.label: a for a in redrawn.arms}
    edges = arms["model.mixer=ssog,model.regime=discrete"].tuning["edges"]
    assert {k: e.side for k, e in edges.items()} == {"model.ssog.num_gaussians": "upper", "train.lr": "upper"}
    assert arms["model.mixer=ssog,model.regime=ode"].tuning["budget"]["n_failed"] == 1
    assert arms["model.mixer=ssog,model.regime=discrete"].tuning["confirmation"][
        "changed"
    ]  # from comparison.json
    assert arms["model.mixer=ssog,model.regime=ode"].tuning["confirmation"] is None
    report = res.report_path.read_text()
    assert "## Does the low-fidelity ranking transfer? ([transfer.csv](transfer.csv))" in report
    assert "(data.num_train=100, train.epochs=1)" in report
    assert "**ssog · discrete** — ρ undefined (n = 2 < 3); **the choice changed**: full " in report
    assert "1 of 3 confirmation runs did not qualify (failed or short)." in report
    assert "| 2 (#2) | lr=0.01 | 0.77 | 0.85 | ✓ |" in report
    assert "| 3 (#0) | lr=1e-3 | 0.7 | — (did not qualify) |  |" in report
    assert "| ssog · discrete | attention · discrete | +" in report


def test_comparison_verdicts_read_test_with_the_image_bootstrap(comparison):
    """Discrete arms logged per-image predictions (bootstrap over seeds x images); ODE arms did not
    (t-interval only, and the report says so). Both redraws agree to the byte."""
    res, redrawn = comparison
    assert res.predictions_path == res.out_dir / "predictions.parquet"
    preds = pq.read_table(res.predictions_path)
    assert preds.column_names == ["run_id", "split", "index", "correct"]
    assert preds.num_rows == 8 * (600 + 1000)  # 2 discrete arms x 4 final seeds, val and test
    assert redrawn.predictions_path.read_bytes() == res.predictions_path.read_bytes()
    by_arm = {c.candidate: c for c in res.comparisons}
    disc = by_arm["model.mixer=ssog,model.regime=discrete"]
    assert disc.test.route == "bootstrap and t" and disc.test.boot.n_images == 1000
    assert disc.test.boot.over == "seeds × images" and disc.test.boot.n_seeds == 4
    assert disc.test.boot.low < disc.test.boot.mean < disc.test.boot.high
    assert disc.test.boot.mean == pytest.approx(disc.test.t.mean, abs=0.001)  # predictions match top-1
    assert disc.verdict == "better" and disc.test.family == 2
    ode = by_arm["model.mixer=ssog,model.regime=ode"]
    assert ode.test.boot is None and ode.test.route == "t" and ode.verdict == "worse"
    report = res.report_path.read_text()
    assert "## Δ top-1 against the reference: verdicts on test" in report
    b = disc.test.boot
    cell = f"{100 * b.mean:+.2f} [{100 * b.low:+.2f}, {100 * b.high:+.2f}]"
    assert f"| ssog · discrete | attention · discrete | {100 * disc.test.t.mean:+.2f} ± " in report
    assert f"| {cell} |" in report and "| 1000 |" in report and "| ±1 | better |" in report
    assert "No per-image predictions (older runs) for ssog · ode − attention · ode" in report
    assert "Holm-adjusted across the k = 2 comparisons" in report
    rows = {r["arm"]: r for r in pacsv.read_csv(res.out_dir / "deltas.csv").to_pylist()}
    row = rows["model.mixer=ssog,model.regime=discrete"]
    assert row["boot_low"] == pytest.approx(b.low) and row["n_test_images"] == 1000
    assert row["verdict"] == "better" and row["p_from"] == "bootstrap and t" and row["holm_k"] == 2
    assert rows["model.mixer=ssog,model.regime=ode"]["p_from"] == "t"
    assert (redrawn.out_dir / "deltas.csv").read_bytes() == (res.out_dir / "deltas.csv").read_bytes()


def test_predictions_download_quietly_and_older_runs_have_none(comparison, stores, capfd):
    from vitscale.analysis.load.predictions import fetch_predictions

    res = comparison[0]
    phase, regime = res.runs.column("phase").to_pylist(), res.runs.column("model.regime").to_pylist()
    ids = res.runs.column("run_id").to_pylist()
    with_preds = next(ids[i] for i in range(len(ids)) if phase[i] == "final" and regime[i] == "discrete")
    without = next(ids[i] for i in range(len(ids)) if phase[i] == "final" and regime[i] == "ode")
    capfd.readouterr()
    got = fetch_predictions(stores["uri"], [without, with_preds])
    assert set(got.column("run_id").to_pylist()) == {with_preds}
    assert sorted(set(got.column("split").to_pylist())) == ["test", "val"]
    assert "Downloading artifacts" not in capfd.readouterr().err


def test_cli_summary_names_its_split_and_says_one_configurations_number_once(
    train, comparison, tmp_path, capsys
):
    """The issue: 'best config top-1 (%)' named no split, and an arm of one configuration repeated
    it as 'mean over runs'. Without a terminal the table is rendered whole, never cut mid-number."""
    from vitscale.cli import main

    main(["analyze", COMPARISON_STUDY, "--from", str(comparison[0].runs_path), "--out", str(tmp_path / "c")])
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "mixer" in line and "regime" in line)
    assert "val top-1 (%)" in header and "best config" not in header and "over all runs" not in header
    assert "(validation top-1: a configuration's mean over its seeds)" in out
    assert all(len(line) <= 200 for line in out.splitlines() if line.startswith(("┃", "│")))

    several = [row for row in train[0].summary() if row["configs"] > 1]
    assert several  # the train study's arms hold several configurations
    main(["analyze", TRAIN_STUDY, "--from", str(train[0].runs_path), "--out", str(tmp_path / "t")])
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if "mixer" in line and "regime" in line)
    assert "best config val top-1 (%)" in header and "val top-1 over all runs (%)" in header
    row = next(line for line in out.splitlines() if line.startswith("│ " + several[0]["mixer"]))
    assert f"{100 * several[0]['mean_top1']:.2f}" in row  # the mean over all runs, whole on one line
