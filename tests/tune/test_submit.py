"""Submitted studies without a cluster: where their storage resolves, the storage verdict, what a
submitted job carries (entrypoint, runtime_env, metadata), and `study status` from job details and
a real MLflow store (the job client is faked; tests/tune/test_submit_cluster.py uses a real one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ray.job_submission import JobDetails, JobStatus, JobType

from vitscale.cli import main
from vitscale.errors import UserError
from vitscale.tracking import layout
from vitscale.tune import jobs, storage, submit

REPO = Path(__file__).resolve().parents[2]
IDS = ["raysubmit_ufT7Rmr4GabcdEFG", "raysubmit_Zq81kLm0pQrsTuvW", "raysubmit_Hh4n6Bb2Cc8Dd0Ee"]


def test_a_submitted_jobs_relative_storage_resolves_on_persistent_storage(tmp_path, monkeypatch):
    work = tmp_path / "session_x" / "runtime_resources" / "working_dir_files" / "_ray_pkg_1"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv(storage.ROOT_ENV, raising=False)
    monkeypatch.delenv(storage.JOB_ENV, raising=False)
    assert storage.resolve("./ray_results") == work.resolve() / "ray_results"  # a local run: cwd

    monkeypatch.setenv(storage.JOB_ENV, "1")
    assert storage.resolve("./ray_results") == (tmp_path / "home" / "vitscale" / "ray_results").resolve()
    assert storage.resolve("/data/results") == Path("/data/results")
    monkeypatch.setenv(storage.ROOT_ENV, str(tmp_path / "shared"))
    assert storage.resolve("ray_results") == (tmp_path / "shared" / "ray_results").resolve()
    assert storage.resolve("file:///data/x") == Path("/data/x")
    with pytest.raises(UserError, match="inside the job's working_dir"):
        storage.resolve(str(work / "ray_results"))
    with pytest.raises(UserError, match="only local or shared-filesystem"):
        storage.resolve("s3://bucket/results")


def test_storage_verdict_names_blind_nodes_and_ray_temp_dirs_in_one_line(tmp_path):
    root = tmp_path / "results"
    head = storage.NodeReply("a" * 40, "10.0.0.1", "/tmp/ray", True)
    worker = storage.NodeReply("b" * 40, "10.0.0.2", "/tmp/ray", False)
    assert storage.refusal(root, [head, head]) is None
    line = storage.refusal(root, [head, worker])
    assert "1 of 2 nodes" in line and "10.0.0.2" in line and "--set storage=/shared/path" in line
    assert "\n" not in line
    scratch = storage.NodeReply("c" * 40, "10.0.0.3", str(tmp_path), True)
    line = storage.refusal(root, [head, scratch])
    assert "inside Ray's temp dir" in line and "10.0.0.3" in line and "--set storage=" in line


def test_current_job_id_comes_from_the_job_config_ray_gives_the_driver(monkeypatch):
    monkeypatch.delenv("RAY_JOB_CONFIG_JSON_ENV_VAR", raising=False)
    assert jobs.current_job_id() is None
    config = {"runtime_env": {}, "metadata": {"job_submission_id": IDS[0]}}
    monkeypatch.setenv("RAY_JOB_CONFIG_JSON_ENV_VAR", json.dumps(config))
    assert jobs.current_job_id() == IDS[0]


class FakeJobClient:
    """The part of JobSubmissionClient vitscale uses, recording submissions."""

    def __init__(self, details: list[JobDetails] = ()) -> None:
        self.details, self.submitted = list(details), []

    def submit_job(self, **kwargs) -> str:
        self.submitted.append(kwargs)
        return IDS[len(self.submitted) - 1]

    def list_jobs(self) -> list[JobDetails]:
        return self.details

    def get_job_info(self, job_id: str) -> JobDetails:
        return next(d for d in self.details if d.submission_id == job_id)


@pytest.fixture
def fake_client(monkeypatch, tmp_path):
    client = FakeJobClient()
    monkeypatch.setattr(submit, "job_client", lambda address: client)
    monkeypatch.setattr(jobs, "job_client", lambda address: client)
    monkeypatch.setattr(submit, "STATE_DIR", tmp_path / "state")
    monkeypatch.setattr(submit, "LAST_ADDRESS_FILE", tmp_path / "state" / "address")
    monkeypatch.setattr(submit, "LAST_TRACKING_FILE", tmp_path / "state" / "tracking")
    monkeypatch.setattr("vitscale.tracking.store.check_tracking_uri", lambda *a, **k: None)
    return client


def test_submit_and_remote_resume_run_as_jobs_on_the_clusters_storage(fake_client, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    monkeypatch.delenv("VITSCALE_TRACKING_URI", raising=False)
    uri = "http://127.0.0.1:5091"
    address = "http://127.0.0.1:8275"
    main(["study", "submit", "studies/quickstart.yaml", "--address", address, "--tracking-uri", uri])
    main(["study", "resume", "quickstart", "--address", address, "--storage", "/shared/results"])
    assert capsys.readouterr().out.split() == IDS[:2]
    run, resume = fake_client.submitted
    assert run["entrypoint"].startswith("vitscale study run studies/quickstart.yaml --address auto")
    assert run["runtime_env"]["env_vars"][storage.JOB_ENV] == "1"
    assert run["metadata"] == {
        "vitscale_study": "quickstart",
        "vitscale_command": "run",
        "vitscale_file": "studies/quickstart.yaml",
        "vitscale_trials": "18",
        "vitscale_tracking_uri": uri,
        "vitscale_experiment": "quickstart",
    }
    assert resume["entrypoint"] == "vitscale study resume quickstart --address auto --storage /shared/results"
    assert resume["runtime_env"]["working_dir"] == str(REPO)
    assert resume["runtime_env"]["env_vars"][storage.JOB_ENV] == "1"
    assert resume["metadata"] == {
        "vitscale_study": "quickstart",
        "vitscale_command": "resume",
        "vitscale_tracking_uri": uri,  # remembered from the submit, for `study status`
    }


def _study_in_mlflow(uri: str, job_ids: list[str]) -> None:
    """A parent run tagged as a job's driver tags it, with 4 children: 2 finished, 1 failed, 1 running."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment("quickstart")
    tags = {layout.ROLE: "study", layout.JOBS: " ".join(job_ids), layout.PLANNED_TRIALS: "24"}
    parent = client.create_run(experiment, tags=tags).info.run_id
    for status in ("FINISHED", "FINISHED", "FAILED", "RUNNING"):
        child = {layout.ROLE: "trial", layout.PARENT_RUN_ID: parent, layout.STATUS: status}
        client.create_run(experiment, tags=child)


def test_status_fits_100_columns_with_full_job_ids_study_names_and_progress(
    fake_client, capsys, monkeypatch, tmp_path
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    _study_in_mlflow(uri, IDS[:2])
    start = 1_747_000_000_000

    def job(i, status, metadata, minutes):
        return JobDetails(
            type=JobType.SUBMISSION,
            job_id=f"0{i}000000",
            submission_id=IDS[i],
            status=status,
            entrypoint="vitscale study run studies/x.yaml --address auto --tracking-uri " + "x" * 200,
            start_time=start + i * 60_000,
            end_time=start + i * 60_000 + minutes * 60_000,
            metadata=metadata,
        )

    meta = {"vitscale_study": "quickstart", "vitscale_tracking_uri": uri, "vitscale_experiment": "quickstart"}
    fake_client.details = [
        job(2, JobStatus.FAILED, {"vitscale_study": "paper_cifar100_tuned", "vitscale_trials": "78"}, 1),
        job(0, JobStatus.STOPPED, {**meta, "vitscale_trials": "24"}, 3),
        job(1, JobStatus.SUCCEEDED, {**meta, "vitscale_command": "resume"}, 125),
    ]
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.setenv("VITSCALE_TRACKING_URI", "http://127.0.0.1:9")  # for the job naming none
    main(["study", "status", "--address", "http://127.0.0.1:8275"])
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 4 and all(len(line) <= 100 for line in out), out
    assert out[0].split() == ["job", "id", "study", "status", "started", "time", "trials"]
    for line, ident, study, status, trials in zip(
        out[1:],
        IDS,
        ["quickstart", "quickstart", "paper_cifar100_tuned"],
        ["STOPPED", "SUCCEEDED", "FAILED"],
        ["3/24", "3/24", "?/78"],
        strict=True,
    ):
        cells = line.split()
        assert cells[:3] == [ident, study, status] and cells[-1] == trials, line
    assert out[2].split()[5] == "2h05m"

    main(["study", "status", IDS[1], "--address", "http://127.0.0.1:8275", "--json"])
    [row] = json.loads(capsys.readouterr().out)
    assert row["job_id"] == IDS[1] and row["trials_done"] == 3 and row["trials_planned"] == 24
    assert row["command"] == "resume" and row["duration_s"] == 125 * 60
