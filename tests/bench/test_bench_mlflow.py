"""`vitscale bench --tracking-uri`: a parent run and one child per configuration that
`vitscale analyze` reads as a benchmark study."""

from __future__ import annotations

from mlflow import MlflowClient

from vitscale.tracking import layout
from vitscale.tune.bench_log import MlflowBenchLog


def _records(config):
    from vitscale.bench.records import blank_record

    out = []
    for i, point in enumerate(config.configurations()):
        r = blank_record(config, point, "cpu")
        r.update(
            status="ok",
            images_per_second=10.0 * (i + 1),
            latency_ms=100.0,
            peak_memory_mb=500.0 + i,
            baseline_memory_mb=300.0,
            flops_per_image=1e6,
            params=1000,
            nfe=None,
            threads=1,
        )
        out.append(r)
    out[1].update(
        status="out_of_memory", error="OutOfMemoryError: CUDA out of memory", images_per_second=None
    )
    return out


def test_parent_and_children_in_the_layout_analyze_reads(tiny_config, tmp_path):
    config = tiny_config(resolutions=[16, 32])
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    log = MlflowBenchLog(config, uri, "bench-test")
    for record in _records(config):
        log.log(record)
    log.finish()

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name("bench-test")
    [parent] = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'study'")
    assert parent.data.tags[layout.KIND] == "benchmark" and parent.data.tags[layout.STUDY] == "bench-test"
    assert parent.info.status == "FINISHED" and parent.data.tags[layout.SPEC_HASH]
    assert "spec.yaml" in [a.path for a in client.list_artifacts(parent.info.run_id)]
    children = client.search_runs([exp.experiment_id], "tags.`vitscale.role` = 'trial'")
    assert len(children) == 6
    for child in children:
        tags, params = child.data.tags, child.data.params
        assert tags[layout.PARENT_RUN_ID] == parent.info.run_id and tags[layout.CONFIG_KEY]
        bench = {f"bench.{k}" for k in ("batch_size", "mode", "dtype", "device", "compile", "seed")}
        model = {
            f"model.{k}" for k in ("mixer", "regime", "image_size", "width", "depth", "heads", "patch_size")
        }
        assert bench | model | {"model.attention.backend", "model.ssog.num_gaussians"} <= set(params)
        assert not any(k.startswith("bench.") and k[6:] in {"mixer", "width", "resolution"} for k in params)
        math = params["model.mixer"] == "attention" and params["model.attention.backend"] == "math"
        if math and params["model.image_size"] == "16":
            assert child.info.status == "FAILED" and tags[layout.STATUS] == "FAILED"
            assert tags[layout.FAILURE_REASON].startswith("out_of_memory: OutOfMemoryError")
            assert "images_per_second" not in child.data.metrics
        else:
            assert child.info.status == "FINISHED" and tags[layout.STATUS] == "FINISHED"
            assert {
                "images_per_second",
                "latency_ms",
                "peak_memory_mb",
                "flops_per_image",
                "tokens",
                "params",
            } <= set(child.data.metrics)
            assert "nfe" not in child.data.metrics  # not an ODE configuration

    from vitscale.analysis.pipeline import analyze

    result = analyze("bench-test", uri, tmp_path / "report", log_artifacts=False)
    assert result.kind == "benchmark"
    series = set(result.aggregates.column("series").to_pylist())
    assert series == {"attention/sdpa", "attention/math", "ssog"}
    assert set(result.aggregates.column("setting").to_pylist()) == {""}  # nothing splits the curves
    report = result.report_path.read_text()
    assert "ssog/attention/sdpa throughput" in report and "| oom |" in report
