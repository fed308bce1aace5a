"""Without MLflow: param typing, trial dedupe, the snapshot format, and headless figures from it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from analysis_stores import fake_run

from vitscale.analysis.load.runs import (
    StudyRuns,
    dedupe_by_trial,
    parse_param_column,
    read_snapshot,
    runs_to_table,
    write_snapshot,
)
from vitscale.analysis.pipeline import analyze
from vitscale.errors import UserError
from vitscale.tracking import layout


def test_params_get_their_types_back():
    assert parse_param_column(["1", "2", None]).type == pa.int64()
    assert parse_param_column(["1", "2.5"]).to_pylist() == [1.0, 2.5]
    assert parse_param_column(["True", "false", "None"]).to_pylist() == [True, False, None]
    assert parse_param_column(["1e-3", "nan"]).type == pa.float64()
    assert parse_param_column(["sdpa", "1"]).type == pa.string()
    assert parse_param_column(["None", None]).null_count == 2


def test_newest_run_of_a_trial_wins():
    old = fake_run("r1", "t1", 100, {}, {"val_top1": 0.1})
    new = fake_run("r2", "t1", 200, {}, {"val_top1": 0.2})
    other = fake_run("r3", "t2", 50, {}, {})
    kept = {r.info.run_id for r in dedupe_by_trial([new, old, other])}
    assert kept == {"r2", "r3"}


def train_runs() -> list:
    runs, n = [], 0
    for mixer in ("attention", "ssog"):
        for regime in ("discrete", "looped"):
            for width in (32, 64, 128, 256):  # 4 sizes: the least a power-law fit accepts
                for seed in (0, 1, 2):
                    n += 1
                    params = 12 * width**2 * (0.9 if mixer == "ssog" else 1.0)
                    top1 = 1 - (6 * params**-0.3 + 0.05) + 0.001 * seed + (0.02 if mixer == "ssog" else 0)
                    cfg = {
                        "model.mixer": mixer,
                        "model.regime": regime,
                        "model.width": width,
                        "train.seed": seed,
                        "data.resolution": 32,
                        "model.patch_size": 4,
                    }
                    runs.append(
                        fake_run(
                            f"r{n:03d}",
                            f"t{n:03d}",
                            n,
                            cfg,
                            {"val_top1": top1, "params": params, "flops_per_image": 64 * params},
                            **{layout.CONFIG_KEY: f"{mixer}-{regime}-{width}"},
                        )
                    )
    return runs


def test_snapshot_round_trip_and_headless_figures(tmp_path: Path):
    table = runs_to_table(train_runs(), "offline")
    snap = write_snapshot(StudyRuns("offline", "train", table, ["p1"]), tmp_path / "in" / "runs.parquet")
    back = read_snapshot(snap)
    assert back.table.equals(table) and back.parent_run_ids == ["p1"] and back.kind == "train"
    assert back.table.schema.field("model.width").type == pa.int64()
    assert back.param_columns[:2] == ["data.resolution", "model.mixer"]

    res = analyze("offline", out=tmp_path / "out", from_parquet=snap, n_boot=20)
    assert res.logged_to is None
    names = sorted(p.name for p in res.figure_paths)
    for stem in ("accuracy_vs_params", "accuracy_vs_flops", "error_vs_params"):
        png, svg = tmp_path / "out" / "figures" / f"{stem}.png", tmp_path / "out" / "figures" / f"{stem}.svg"
        assert png.name in names and svg.name in names
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
        assert b"<svg" in svg.read_bytes()[:2000]
    assert "accuracy_vs_nfe.png" not in names  # no ODE regime in this study
    assert all(f.status == "ok" for f in res.fits)
    assert (tmp_path / "out" / "pareto_params_val_top1.csv").stat().st_size > 0


def test_snapshot_errors_are_user_errors(tmp_path: Path):
    with pytest.raises(UserError, match="no such file"):
        read_snapshot(tmp_path / "missing.parquet")
    bad = tmp_path / "bad.parquet"
    bad.write_text("not parquet")
    with pytest.raises(UserError, match="not a Parquet file"):
        read_snapshot(bad)
    table = runs_to_table(train_runs()[:2], "offline")
    snap = write_snapshot(StudyRuns("offline", "train", table), tmp_path / "runs.parquet")
    with pytest.raises(UserError, match="holds study 'offline', not 'other'"):
        analyze("other", out=tmp_path / "o", from_parquet=snap)
    blocked = tmp_path / "a-file"  # an --out that cannot be made was a FileNotFoundError traceback
    blocked.write_text("not a folder")
    with pytest.raises(UserError, match=r"^--out: cannot create .*a-file/out \(Not a directory\)"):
        analyze("offline", out=blocked / "out", from_parquet=snap)
