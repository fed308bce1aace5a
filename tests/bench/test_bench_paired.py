"""Paired timing (bench.paired): a candidate's benchmark trial times its cell's attention
configurations round-robin beside its own and reports its ratios to them."""

from __future__ import annotations

import pytest

from vitscale.bench import paired
from vitscale.bench.runner import measure_paired
from vitscale.bench.trial import measure_trial, trial_result
from vitscale.study import load_study


def test_a_candidate_is_timed_beside_every_attention_backend_of_its_cell(tiny_config):
    config = tiny_config(attention_backends=["sdpa", "math"])
    ssog = {"mixer": "ssog", "regime": "discrete", "resolution": 16, "attention_backend": None}
    refs = paired.references(config, ssog)
    assert [(r["mixer"], r["attention_backend"], r["regime"], r["resolution"]) for r in refs] == [
        ("attention", "sdpa", "discrete", 16),
        ("attention", "math", "discrete", 16),
    ]
    assert paired.references(config, refs[0]) == []  # attention is the reference itself
    assert paired.references(tiny_config(mixers=["ssog", "pooling"]), ssog) == []  # nothing to pair with
    assert paired.is_paired(config, "cpu") and not paired.is_paired(config, "cuda")
    assert not paired.is_paired(config.model_copy(update={"paired": False}), "cpu")


def test_paired_metrics_divide_the_timings_taken_together():
    own = {"status": "ok", "images_per_second": 80.0, "cpu_ms": 25.0, "latency_spread": 0.02}
    sdpa = {"status": "ok", "attention_backend": "sdpa", "images_per_second": 100.0, "cpu_ms": 20.0,
            "latency_spread": 0.03}  # fmt: skip
    failed = {"status": "out_of_memory", "attention_backend": "math", "images_per_second": None}
    assert paired.paired_metrics(own, [sdpa, failed]) == {
        "paired_ratio_sdpa": pytest.approx(0.8),
        "paired_cpu_ratio_sdpa": pytest.approx(0.8),
        "paired_margin_sdpa": pytest.approx(0.05),
    }
    assert paired.paired_metrics({"status": "error"}, [sdpa]) == {}


def test_the_candidates_memory_is_measured_alone_then_it_is_timed_beside_attention(tiny_config):
    config = tiny_config(attention_backends=["sdpa", "math"])
    point = {"mixer": "ssog", "regime": "discrete", "resolution": 16, "attention_backend": None}
    record = measure_paired(config, point, paired.references(config, point))
    assert record["status"] == "ok", record.get("error")
    assert record["timing"] == "interleaved" and record["repeats"] == config.repeats
    assert record["memory_kind"] == "rss_above_idle" and record["peak_memory_mb"] >= 0
    for backend in ("sdpa", "math"):
        assert record[f"paired_ratio_{backend}"] > 0 and record[f"paired_cpu_ratio_{backend}"] > 0
        assert record[f"paired_margin_{backend}"] >= 0.01


def test_a_study_trial_on_the_cpu_reports_its_paired_ratios_to_tune(tmp_path, tiny_config):
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: paired-tiny\nkind: benchmark\nresources: {cpu: 1, gpu: 0}\n"
        "benchmark: {mixers: [attention, ssog], regimes: [discrete], resolutions: [16], attention_backends: [sdpa],"
        " model: {width: 16, depth: 1, heads: 2, patch_size: 8, num_classes: 5}, batch_size: 2, device: cpu,"
        " warmup: 1, repeats: 3}\n"
    )
    spec = load_study(study)
    point = {"mixer": "ssog", "regime": "discrete", "resolution": 16, "attention_backend": None}
    result = trial_result(measure_trial({"point": point, "seed": 0}, spec), "node")
    assert result["paired_ratio_sdpa"] > 0 and "paired_ratio_math" not in result
    attention = trial_result(measure_trial({"point": {**point, "mixer": "attention", "attention_backend": "sdpa"},
                                            "seed": 0}, spec), "node")  # fmt: skip
    assert not any(k.startswith("paired_") for k in attention) and attention["images_per_second"] > 0
