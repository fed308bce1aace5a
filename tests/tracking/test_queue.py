"""The durable MLflow write queue: writes return at once, survive an outage and a killed writer,
arrive in order, once, and runs created while the server was away get their real ids."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time

import pytest
from mlflow import MlflowClient

from vitscale.errors import UserError
from vitscale.tracking import layout, queued, store
from vitscale.tracking.queue import WriteQueue


class FlakyClient:
    """An MlflowClient on a SQLite store that refuses every call while `down` is set."""

    def __init__(self, uri: str) -> None:
        self.real = MlflowClient(tracking_uri=uri)
        self.down = False
        self.calls = 0

    def __getattr__(self, name):
        method = getattr(self.real, name)

        def call(*args, **kwargs):
            self.calls += 1
            if self.down:
                raise ConnectionError("Connection refused")
            return method(*args, **kwargs)

        return call


@pytest.fixture
def flaky(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    client = FlakyClient(uri)
    monkeypatch.setattr(store, "client_for", lambda _uri: client)
    yield uri, client
    queued.close_all(timeout=5)


def test_writes_during_an_outage_return_at_once_and_arrive_in_order_when_it_ends(tmp_path, flaky):
    uri, client = flaky
    experiment = client.real.create_experiment("q")
    client.down = True
    writer = queued.queued_client(uri, tmp_path / "queue")
    writer.queue.max_backoff = 0.2
    started = time.monotonic()
    parent = store.create_study_run(writer, experiment, "q", "train", "hash", "name: q\n")
    child = store.create_child_run(writer, experiment, parent, "q", "train", "t1", run_name="t1")
    for epoch in range(1, 6):
        store.log_metrics(writer, child, {"val_top1": epoch / 10, "epoch": epoch}, step=epoch)
    writer.set_terminated(child, "FINISHED")
    assert time.monotonic() - started < 2  # nothing waited on the server
    time.sleep(1)
    assert client.calls > 1 and writer.queue.stats().sent == 0  # it kept trying, in vain
    client.down = False
    stats = queued.close_all(timeout=30)
    # every write arrived; the outage delayed those the queue's thread had reached before it ended
    # (all of them on a quiet machine, 10 of 12 under load)
    assert stats.pending == 0 and stats.rejected == 0 and 0 < stats.delayed <= stats.queued == stats.sent
    assert "none lost" in stats.line()

    real_child = writer.resolve(child)
    run = client.real.get_run(real_child)
    assert run.data.tags[layout.PARENT_RUN_ID] == writer.resolve(parent)  # not the placeholder
    assert run.info.status == "FINISHED"
    steps = [m.step for m in client.real.get_metric_history(real_child, "val_top1")]
    assert steps == [1, 2, 3, 4, 5]
    assert len(client.real.search_runs([experiment])) == 2


def test_a_killed_writer_leaves_its_writes_to_the_next_process(tmp_path):
    """A driver killed during an outage (SIGKILL, mid-write): the next process sends everything,
    including a create that had reached the server but whose id was never noted, exactly once."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    real = MlflowClient(tracking_uri=uri)
    experiment = real.create_experiment("k")
    folder = tmp_path / "execution" / queued.QUEUE_DIR  # where a study driver keeps it
    script = textwrap.dedent(
        f"""
        import os
        from vitscale.tracking import queued, store
        writer = queued.queued_client("http://127.0.0.1:9", {str(folder)!r})  # nothing listens
        run = writer.create_run({experiment!r}, tags={{"a": "b"}}, run_name="r")
        for step in range(1, 4):
            store.log_metrics(writer, run.info.run_id, {{"loss": 1.0 / step}}, step=step)
        with open({str(folder / "journal.jsonl")!r}, "a") as f:
            f.write('{{"seq": 99, "op": "log_ba')  # torn by the kill
        os.kill(os.getpid(), 9)
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr
    ref = json.loads((folder / "journal.jsonl").read_text().splitlines()[0])["ref"]
    # The create had reached the server before the kill:
    real.create_run(experiment, tags={"a": "b", layout.QUEUE_ID: ref}, run_name="r")

    # What `study resume` does before Tune restarts: open every queue the execution holds.
    queued.open_pending(tmp_path / "execution", uri)
    queue = queued.open_queue(folder, uri)
    assert queue.find(a="b") == ref and queue.steps[ref] == 3
    stats = queued.close_all(timeout=30)
    assert (stats.queued, stats.sent, stats.delayed, stats.pending) == (4, 4, 4, 0)
    [run] = real.search_runs([experiment])
    assert [m.step for m in real.get_metric_history(run.info.run_id, "loss")] == [1, 2, 3]
    # Opened again: nothing is sent twice.
    again = WriteQueue(folder, uri)
    assert again.stats().pending == 0
    again.close(timeout=5)


def test_one_process_at_a_time_per_queue_folder(tmp_path):
    first = WriteQueue(tmp_path / "q", "sqlite:///unused.db")
    try:
        with pytest.raises(UserError, match="another live process"):
            WriteQueue(tmp_path / "q", "sqlite:///unused.db")
    finally:
        first.close(timeout=1)


def test_a_refused_write_is_set_aside_and_the_rest_go_on(tmp_path, flaky):
    uri, client = flaky
    experiment = client.real.create_experiment("r")
    writer = queued.queued_client(uri, tmp_path / "queue")
    run = writer.create_run(experiment, run_name="r").info.run_id
    writer.log_param(run, "width", "8")
    writer.log_param(run, "width", "16")  # MLflow refuses to change a param
    writer.log_metric(run, "loss", 0.5, step=1)
    stats = queued.close_all(timeout=30)
    assert (stats.rejected, stats.pending, stats.sent) == (1, 0, 3)
    assert "refused" in stats.line()
    assert client.real.get_run(writer.resolve(run)).data.metrics == {"loss": 0.5}
    assert (tmp_path / "queue" / "rejected.jsonl").read_text().count("\n") == 1


def test_find_names_the_newest_run_created_with_every_tag_asked(tmp_path):
    """Looked up per trial by its id (`tune_callback`): an index by tag, also read back from the
    journal by the next process."""
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    queue = WriteQueue(tmp_path / "q", uri)
    refs = [queue.create_run("0", {"parent": "p", "trial": trial}, trial) for trial in ("t1", "t2", "t1")]
    queue.close(timeout=60)
    for reader in (queue, WriteQueue(tmp_path / "q", uri)):
        assert reader.find(parent="p", trial="t1") == refs[2]
        assert reader.find(parent="p", trial="t2") == refs[1]
        assert reader.find(parent="p", trial="t3") is None and reader.find(parent="q") is None
        assert reader.find(trial="t2", parent="p") == refs[1]
    reader.close(timeout=10)
