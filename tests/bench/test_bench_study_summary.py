"""(slow) `vitscale study run` of a benchmark study: its terminal summary (the best configuration
per resolution) carries the report's caveat on contended timings, in the report's words
(`bench.contention.contention_caveat`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tune"))

from study_helpers import child_runs, vitscale  # noqa: E402

from vitscale.bench.contention import contention_caveat  # noqa: E402

STUDY = """\
name: bench-summary
kind: benchmark
resources: {cpu: 1, gpu: 0}
benchmark:
  mixers: [attention, ssog]
  regimes: [discrete]
  resolutions: [16, 32]
  attention_backends: [sdpa]
  model: {width: 16, depth: 1, heads: 2, patch_size: 8, num_classes: 5}
  batch_size: 2
  device: cpu
  warmup: 2
  repeats: 5
"""


@pytest.mark.slow
def test_a_benchmark_studys_summary_comes_with_the_reports_caveat_on_its_timings(tmp_path):
    (tmp_path / "bench.yaml").write_text(STUDY)
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = ["study", "run", "bench.yaml", "--tracking-uri", uri, "--storage", "results", "--quiet"]
    out = vitscale(*run, "--num-cpus", "2", cwd=tmp_path).stdout
    assert "at 16 px by the mean over seeds" in out and "at 32 px by the mean over seeds" in out, out

    ratios = [r.data.metrics.get("cpu_wall_ratio") for r in child_runs(uri, "bench-summary")]
    caveat = contention_caveat(ratios)
    assert caveat is not None, ratios  # every CPU timing records its ratio
    report_dir = tmp_path / "analysis"
    vitscale("analyze", "bench-summary", "--tracking-uri", uri, "--out", str(report_dir), cwd=tmp_path)
    section = (report_dir / "report.md").read_text().split("## Contended timings\n\n")[1].splitlines()[0]
    assert section.startswith(caveat), (section, caveat)  # the report says it so
    if caveat.startswith("None"):  # nothing to warn of: the summary stays quiet
        assert "Contended timings" not in out, out
    else:  # the summary says what the report says, after the fronts it qualifies
        assert f"Contended timings: {caveat}" in out, out
        assert out.index("Contended timings") > out.index("at 32 px by the mean over seeds")
