"""`vitscale bench --set PATH=VALUE`: any BenchmarkConfig key, after the flags; bad ones: one line, exit 2."""

from __future__ import annotations

import json

from vitscale.cli import main

SMALL = ["--width", "16", "--depth", "1", "--heads", "2", "--patch-size", "8", "--batch-size", "2"]
SMALL += ["--warmup", "0", "--repeats", "1", "--threads", "1", "--device", "cpu", "--num-classes", "5"]
SMALL += ["--mixers", "ssog", "--regimes", "discrete", "--resolutions", "16"]


def test_set_reaches_the_sweep_and_the_model_and_wins_over_the_flags(capsys):
    main(
        [
            "bench",
            *SMALL,
            "--set",
            "resolutions=[16, 32]",  # beats --resolutions 16
            "--set",
            "model.width=24",  # beats --width 16
            "--set",
            "model.ssog.num_gaussians=2",
            "--json",
        ]
    )
    records = json.loads(capsys.readouterr().out)
    assert [r["resolution"] for r in records] == [16, 32]
    assert all(r["status"] == "ok" for r in records), records
    assert {(r["model.width"], r["model.ssog.num_gaussians"], r["batch_size"]) for r in records} == {
        (24, 2, 2)
    }
