"""A new SQLite store is a copy of an empty migrated one: MLflow opens it as its own (default
experiment with this store's artifact location, schema current), runs log as usual; a template
MLflow cannot open is dropped and the store built anew."""

from __future__ import annotations

from mlflow import MlflowClient

from vitscale.tracking import store, store_template


def _use(uri: str) -> str:
    client = store.client_for(uri)
    experiment = store.ensure_experiment(client, "x")
    run = client.create_run(experiment)
    client.log_metric(run.info.run_id, "val_top1", 0.5)
    client.set_terminated(run.info.run_id)
    return experiment


def test_the_first_new_store_leaves_a_template_and_the_next_is_a_copy_of_it(tmp_path, monkeypatch):
    monkeypatch.setenv(store_template.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    first = tmp_path / "a" / "mlflow.db"
    first.parent.mkdir()
    _use(f"sqlite:///{first}")
    template = store_template.template_path()
    assert template.is_file()

    second = tmp_path / "b" / "mlflow.db"
    second.parent.mkdir()
    assert store_template.start_from_template(second) and second.read_bytes() == template.read_bytes()
    second.unlink()
    _use(f"sqlite:///{second}")
    client = MlflowClient(tracking_uri=f"sqlite:///{second}")
    default = client.get_experiment("0")  # made by MLflow on first open, for this store
    assert default.name == "Default" and default.artifact_location.startswith(str(tmp_path))
    runs = client.search_runs([client.get_experiment_by_name("x").experiment_id])
    assert [r.data.metrics["val_top1"] for r in runs] == [0.5]


def test_a_template_mlflow_cannot_open_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setenv(store_template.CACHE_ENV, str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    template = store_template.template_path()
    template.parent.mkdir(parents=True)
    template.write_bytes(b"not a database" * 100)
    _use(f"sqlite:///{tmp_path / 'mlflow.db'}")  # built by MLflow after all
    assert template.is_file() and template.read_bytes()[:15] == b"SQLite format 3"  # a good one now
