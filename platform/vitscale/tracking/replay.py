"""How one journal record of `tracking.queue` becomes an MLflow call (the sender thread's half).

Kept apart from the journal so the queue stays about ordering and durability, and so what each
record means in MLflow terms is in one short place. Every call here may be made twice for the same
record (a kill between sending and noting it): all are idempotent but `create_run`, which therefore
looks for the run by its QUEUE_ID tag first whenever an earlier attempt may have got through.
"""

from __future__ import annotations

from mlflow.entities import Metric, Param, RunTag

from vitscale.tracking import layout
from vitscale.tracking.datasets import to_entities
from vitscale.tracking.logged_model import log_served_model

PLACEHOLDER = "queued-"


def create(client, record: dict, look_first: bool, ids: dict[str, str]) -> str:
    """The run of a `create_run` record: found (when `look_first`) or created; its MLflow id.
    Tag values naming a queued run (a parent's placeholder) become its MLflow id."""
    ref = record["ref"]
    if look_first:
        found = client.search_runs(
            [record["experiment_id"]], filter_string=f"tags.`{layout.QUEUE_ID}` = '{ref}'", max_results=1
        )
        if found:
            return found[0].info.run_id
    tags = {**{k: ids.get(v, v) for k, v in record["tags"].items()}, layout.QUEUE_ID: ref}
    run = client.create_run(
        record["experiment_id"], start_time=record["t"], tags=tags, run_name=record["run_name"]
    )
    return run.info.run_id


def send(client, record: dict, ids: dict[str, str], tracking_uri: str = "") -> None:
    """Any other record (placeholders, in its run and tag values, mapped through `ids`). A
    `log_model` whose earlier attempt may have got through looks for its model first."""
    op, run = record["op"], ids.get(record["run"], record["run"])
    if run.startswith(PLACEHOLDER):
        raise KeyError(f"run {run} was never created (its create was refused)")
    if op == "log_batch":
        metrics = [Metric(m["key"], m["value"], m["timestamp"], m["step"]) for m in record.get("metrics", ())]
        params = [Param(k, v) for k, v in record.get("params", ())]
        tags = [RunTag(k, ids.get(v, v)) for k, v in record.get("tags", ())]
        client.log_batch(run, metrics=metrics, params=params, tags=tags)
    elif op == "update_run":
        client.update_run(run, status=record.get("status"), name=record.get("name"))
    elif op == "set_terminated":
        client.set_terminated(run, status=record.get("status"), end_time=record["t"])
    elif op == "log_text":
        client.log_text(run, record["text"], record["artifact_file"])
    elif op == "log_artifact":
        client.log_artifact(run, record["local_path"], record.get("artifact_path"))
    elif op == "log_model":
        look_first = bool(record.get("_tries") or record.get("_replayed"))
        log_served_model(
            client, tracking_uri, run, record["folder"], record["name"], record["step"], look_first
        )
    elif op == "log_inputs":
        client.log_inputs(run, datasets=to_entities(record["inputs"]))
    else:
        raise KeyError(f"unknown queued operation {op!r}")
