"""Submitted studies without a cluster: where their storage resolves, the storage verdict, what a
submitted job carries (entrypoint, runtime_env, metadata, the files it uploads), and `study status`
from job details and a real MLflow store (the job client is faked; tests/tune/test_submit_cluster.py
uses a real one)."""

from __future__ import annotations

import json
import shutil
import subprocess
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
    """The part of JobSubmissionClient vitscale uses, recording submissions and, as Ray's client
    does at that moment, what the working_dir holds (the files that would be uploaded)."""

    def __init__(self, details: list[JobDetails] = ()) -> None:
        self.details, self.submitted, self.uploaded = list(details), [], []

    def submit_job(self, **kwargs) -> str:
        self.submitted.append(kwargs)
        folder = Path(kwargs["runtime_env"]["working_dir"])
        files = {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        self.uploaded.append(files)
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
    for uploaded in fake_client.uploaded:  # this checkout's tracked code, as it is in the working tree
        assert (REPO / "platform/vitscale/cli/app.py").read_bytes() == uploaded[
            "platform/vitscale/cli/app.py"
        ]
        assert not {name for name in uploaded if name.startswith((".venv/", ".git/", "mlruns/"))}
    assert not Path(resume["runtime_env"]["working_dir"]).exists()  # the staging copy is gone again
    assert resume["runtime_env"]["env_vars"][storage.JOB_ENV] == "1"
    assert resume["metadata"] == {
        "vitscale_study": "quickstart",
        "vitscale_command": "resume",
        "vitscale_tracking_uri": uri,  # remembered from the submit, for `study status`
    }


def _checkout_with_secrets(folder: Path) -> Path:
    """A git checkout with a tracked study and module, one uncommitted change to the module, and the
    untracked files a real checkout accumulates (secrets, logs, weights)."""

    def git(*args):
        subprocess.run(["git", *args], cwd=folder, capture_output=True, check=True)

    (folder / "studies").mkdir(parents=True)
    (folder / "platform" / "vitscale").mkdir(parents=True)
    (folder / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (folder / "platform" / "vitscale" / "mod.py").write_text("value = 1\n")
    (folder / "studies" / "quickstart.yaml").write_bytes((REPO / "studies" / "quickstart.yaml").read_bytes())
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    (folder / "platform" / "vitscale" / "mod.py").write_text("value = 2  # PASSWORD=hunter2 (uncommitted)\n")
    untracked = {
        ".env": "AWS_SECRET_ACCESS_KEY=planted\n",
        "id_rsa": "-----BEGIN OPENSSH PRIVATE KEY-----\n",
        "secrets/creds.yaml": "token: planted\n",
        "wandb/run-1/files/config.yaml": "x: 1\n",
        "outputs/model.pt": "weights",
        "studies/draft.yaml": "name: draft\n",
    }
    for name, text in untracked.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def test_submit_uploads_what_git_tracks_and_the_diff_as_a_file_never_in_the_environment(
    fake_client, monkeypatch, tmp_path
):
    checkout = _checkout_with_secrets(tmp_path / "checkout")
    monkeypatch.chdir(checkout)
    for name in ("VITSCALE_TRACKING_URI", "VITSCALE_GIT_COMMIT", "VITSCALE_GIT_DIFF_FILE"):
        monkeypatch.delenv(name, raising=False)
    uri, address = "http://127.0.0.1:5091", "http://127.0.0.1:8275"
    main(["study", "submit", "studies/quickstart.yaml", "--address", address, "--tracking-uri", uri])
    main(["study", "submit", "studies/draft.yaml", "--address", address, "--tracking-uri", uri,
          "--include", "outputs/model.pt"])  # fmt: skip
    first, second = fake_client.uploaded
    assert set(first) == {
        "pyproject.toml",
        "platform/vitscale/mod.py",
        "studies/quickstart.yaml",
        ".vitscale-git.diff",
    }
    assert first["platform/vitscale/mod.py"] == b"value = 2  # PASSWORD=hunter2 (uncommitted)\n"  # what runs
    assert b"+value = 2  # PASSWORD=hunter2" in first[".vitscale-git.diff"]  # the driver logs it as git.diff
    # The study file named on the command line travels even untracked; --include adds what it names.
    assert set(second) == set(first) | {"studies/draft.yaml", "outputs/model.pt"}
    for job in fake_client.submitted:
        env = job["runtime_env"]["env_vars"]
        assert not any("hunter2" in value or "value = 2" in value for value in env.values()), env
        assert env["VITSCALE_GIT_DIFF_FILE"] == ".vitscale-git.diff" and env["VITSCALE_GIT_DIRTY"] == "true"
        assert "excludes" not in job["runtime_env"]


def test_include_outside_the_project_or_missing_is_one_line_and_no_git_is_refused(
    fake_client, monkeypatch, tmp_path
):
    checkout = _checkout_with_secrets(tmp_path / "checkout")
    study = checkout / "studies" / "quickstart.yaml"
    with pytest.raises(UserError, match="--include /etc/passwd: not inside the project"):
        submit.submit(study, "http://x:8265", "http://y:5000", [], _spec(), ["/etc/passwd"])
    with pytest.raises(UserError, match="--include nothing.txt: no such file"):
        submit.submit(study, "http://x:8265", "http://y:5000", [], _spec(), ["nothing.txt"])
    shutil.rmtree(checkout / ".git")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    with pytest.raises(UserError, match="not a git checkout"):
        submit.submit(study, "http://x:8265", "http://y:5000", [], _spec())
    assert fake_client.submitted == []


def _spec():
    from vitscale.study import load_study

    return load_study(REPO / "studies" / "quickstart.yaml")


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
