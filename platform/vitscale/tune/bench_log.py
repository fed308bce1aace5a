"""`vitscale bench --tracking-uri`: the sweep as a study in MLflow, the layout benchmark studies use.

Here, above both `bench` and `study`, because a sweep is recorded as a study (its spec and hash).

A parent run (ROLE=study, KIND=benchmark, STUDY=name, the sweep as a loadable study file in
`spec.yaml`) and one child run per configuration, logged as each configuration finishes, so
an interrupted sweep keeps what it measured. `vitscale analyze NAME --tracking-uri URI` then
reads it like any benchmark study.
"""

from __future__ import annotations

import time
from typing import Any

import yaml

from vitscale.bench.config import VARIANT_KEYS, BenchmarkConfig
from vitscale.bench.fields import bench_metrics, bench_params, config_key, run_name
from vitscale.study import StudySpec, spec_dict, spec_hash
from vitscale.tracking import layout, queued, store


def default_study_name() -> str:
    return time.strftime("bench-%Y%m%d-%H%M%S")


def study_spec(config: BenchmarkConfig, name: str, description: str = "") -> StudySpec:
    """The sweep as a StudySpec (validates `name`); its YAML reruns it as `vitscale study run`."""
    return StudySpec(name=name, kind="benchmark", benchmark=config, description=description)


class MlflowBenchLog:
    """Parent run at construction, one child per `log(record)`, `finish()` closes the parent."""

    def __init__(self, config: BenchmarkConfig, tracking_uri: str, name: str) -> None:
        spec = study_spec(config, name, "vitscale bench")
        store.check_tracking_uri(tracking_uri)
        self.config, self.name = config, name
        # Through a write queue: a tracking outage delays the records instead of failing the sweep.
        self.client = queued.queued_client(tracking_uri)
        self.experiment_id = store.ensure_experiment(self.client, name)
        spec_yaml = yaml.safe_dump(spec_dict(spec), sort_keys=False)
        self.parent_run_id = store.create_study_run(
            self.client, self.experiment_id, name, "benchmark", spec_hash(spec), spec_yaml
        )
        self.count = 0

    def log(self, record: dict[str, Any]) -> str:
        """One child run for one record; returns its run id."""
        keys = ("mixer", "regime", "resolution", "attention_backend", *VARIANT_KEYS)
        point = {k: record[k] for k in keys}
        params = bench_params(self.config, point, record["seed"])
        params["bench.device"] = record["device"]  # the resolved device, never `auto`
        params["bench.threads"] = record.get("threads")
        self.count += 1
        run_id = store.create_child_run(
            self.client,
            self.experiment_id,
            self.parent_run_id,
            self.name,
            "benchmark",
            trial_id=f"bench_{self.count:05d}",
            run_name=run_name(point, record["seed"], self.config),
            tags={layout.CONFIG_KEY: config_key(params)},
        )
        store.log_params(self.client, run_id, params)
        ok = record["status"] == "ok"
        if ok:
            store.log_metrics(self.client, run_id, {**bench_metrics(record), "epoch": 1}, step=1)
        tags = {layout.STATUS: "FINISHED" if ok else "FAILED", layout.STOPPED_EARLY: "false"}
        if not ok:
            tags[layout.FAILURE_REASON] = f"{record['status']}: {record.get('error') or ''}".strip(": ")[
                :4000
            ]
        store.set_tags(self.client, run_id, tags)
        self.client.set_terminated(run_id, "FINISHED" if ok else "FAILED")
        return run_id

    def finish(self, status: str = "FINISHED") -> None:
        self.client.set_terminated(self.parent_run_id, status)
        queued.close_all()
        self.parent_run_id = self.client.resolve(self.parent_run_id)
