"""Submitted studies on the real two-node local cluster (infra/local) with a real MLflow server:
the storage check on every node, and a submitted quickstart that outlives its cluster and resumes,
its runs naming the submitting checkout's commit (and its uncommitted edit); what the job server
unpacked for it holds the tracked files and the diff as a file, never the untracked `.env` (one
job, one cluster start, for both).

What the storage check can show here: the nodes of infra/local share this machine's filesystem, so
there only the temp-dir rule can refuse a path (a path inside a node's own Ray temp dir, which Ray
wipes). The marker probe is exercised for real twice: with a marker no node can find, and with a
second node started in its own mount namespace, where the storage folder is that node's own tmpfs
(a node without the shared mount).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient
from study_helpers import REPO, child_runs, cli_env, parent_runs, vitscale, write_study

from fixtures_cluster import short_temp_dir, start_ray_cluster, stop_ray_cluster

pytestmark = pytest.mark.slow

TINY = [
    "space.model.width={grid: [16]}",
    "space.model.regime={grid: [discrete, looped]}",  # 2 mixers x 2 regimes x 2 seeds = 8 trials
    "trial.model.depth=1",
    "trial.data.num_train=256",
    "trial.data.num_val=96",
    "trial.train.epochs=5",  # long enough that the cluster dies with most trials unfinished (workers are reused)
    "search.seeds=[0, 1]",
]
PLANNED = 8

PROBE = """
import json, sys, ray
from pathlib import Path
from vitscale.tune import storage
ray.init(address=sys.argv[1], logging_level="ERROR")
nodes = [n for n in ray.nodes() if n["Alive"]]
missing = storage._ask_every_node(nodes, sys.argv[2] + "/no-marker-here", "token")
Path(sys.argv[2], "marker").write_text("token")
present = storage._ask_every_node(nodes, sys.argv[2] + "/marker", "token")
print(json.dumps({"missing": [r.__dict__ for r in missing], "present": [r.__dict__ for r in present],
                  "verdict": storage.refusal(Path(sys.argv[2]), missing)}))
"""


@pytest.mark.timeout(600)
def test_a_storage_path_inside_a_nodes_ray_temp_dir_is_refused_before_any_trial(
    ray_cluster, mlflow_server, tmp_path
):
    study = write_study(tmp_path, "node-local-storage", space={"model.mixer": {"grid": ["attention"]}})
    scratch = Path(ray_cluster.temp_dir) / "w1" / "vitscale-results"
    proc = vitscale(
        "study", "run", str(study), "--address", ray_cluster.gcs_address, "--tracking-uri", mlflow_server,
        "--storage", str(scratch), "--quiet", cwd=tmp_path, check=False,
    )  # fmt: skip
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "storage:" in errors[0] and "--set storage=/shared/path" in errors[0], errors
    assert "Traceback" not in proc.stderr
    from mlflow import MlflowClient

    assert MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name("node-local-storage") is None
    assert not scratch.exists()  # the folder the check made is gone again

    # The marker probe: one task on each alive node, each answering from its own node.
    shared = tmp_path / "shared"
    shared.mkdir()
    # A plain Ray client of a loopback-only cluster needs Ray's single-machine switch (infra/README.md).
    out = subprocess.run(
        [sys.executable, "-c", PROBE, ray_cluster.gcs_address, str(shared)],
        capture_output=True, text=True, env={**cli_env(), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
        timeout=300, check=True,
    ).stdout  # fmt: skip
    report = json.loads(out.strip().splitlines()[-1])
    missing, present = report["missing"], report["present"]
    assert len({r["node_id"] for r in missing}) == ray_cluster.num_nodes == 2
    temp = str(Path(ray_cluster.temp_dir).resolve())
    assert sorted(r["temp_dir"] for r in missing) == [temp, f"{temp}/w1"]
    assert not any(r["sees_marker"] for r in missing) and all(r["sees_marker"] for r in present)
    assert (
        "2 of 2 nodes cannot see" in report["verdict"] and "--set storage=/shared/path" in report["verdict"]
    )


def _private_mounts_work() -> bool:
    """Can this machine give one process tree its own view of a folder (a mount namespace)?"""
    try:
        probe = ["unshare", "--mount", "--propagation", "private", "true"]
        return subprocess.run(probe, capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


@pytest.mark.timeout(600)
@pytest.mark.skipif(not _private_mounts_work(), reason="needs `unshare --mount` (root or user namespaces)")
def test_a_path_one_node_cannot_see_is_refused_by_the_marker_probe(mlflow_server, tmp_path):
    """A second node whose view of the storage folder is its own tmpfs (its own mount namespace),
    as a node without the shared mount would be: the driver's marker is invisible there, so the
    study is refused in one line naming that node count, before any MLflow run or trial exists."""
    temp_dir = short_temp_dir()
    store = tmp_path / "node-local"
    store.mkdir()
    try:
        head = start_ray_cluster(temp_dir, workers=0, cpus_per_node=1)
        # `ray start` as ray-up.sh runs it for a node of its loopback-only cluster (infra/README.md)
        ray_start = [sys.executable, str(REPO / "infra" / "local" / "_ray_start.py")]
        start_worker = (
            'mount -t tmpfs tmpfs "$0" && exec "$1" "$2" start --address "$3" --temp-dir "$4" '
            "--node-ip-address 127.0.0.1 --num-cpus 1 --disable-usage-stats "
            "--object-store-memory 268435456 --dashboard-agent-listen-port 0"
        )
        subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", start_worker,
             str(store), *ray_start, head.gcs_address, f"{temp_dir}/w1"],
            check=True, capture_output=True, env={**cli_env(), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},
            timeout=300, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        study = write_study(tmp_path, "blind-node", space={"model.mixer": {"grid": ["attention"]}})
        proc = vitscale(
            "study", "run", str(study), "--address", head.gcs_address, "--tracking-uri", mlflow_server,
            "--storage", str(store), "--quiet", cwd=tmp_path, check=False,
        )  # fmt: skip
    finally:
        stop_ray_cluster(temp_dir)  # the namespaced node too: its arguments name temp_dir/w1
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error:")]
    assert proc.returncode == 2 and len(errors) == 1, proc.stderr[-3000:]
    assert "1 of 2 nodes cannot see" in errors[0] and "--set storage=/shared/path" in errors[0], errors
    assert str(store) in errors[0] and "Traceback" not in proc.stderr
    assert MlflowClient(tracking_uri=mlflow_server).get_experiment_by_name("blind-node") is None
    assert not list(store.iterdir())  # the marker is removed again


def _job_status(address: str, job_id: str) -> str:
    """Straight from the job server's REST API: cheap enough to poll twice a second."""
    with urllib.request.urlopen(f"{address}/api/jobs/{job_id}", timeout=30) as response:
        return json.load(response)["status"]


def _wait_for_job(address: str, job_id: str, timeout: float = 600) -> str:
    deadline, status = time.time() + timeout, "PENDING"
    while time.time() < deadline and status not in ("SUCCEEDED", "FAILED", "STOPPED"):
        time.sleep(3)
        status = _job_status(address, job_id)
    return status


def _finished(uri: str) -> int:
    try:
        return sum(r.data.tags.get("vitscale.status") == "FINISHED" for r in child_runs(uri, "quickstart"))
    except Exception:  # the experiment may not exist yet
        return 0


SECRET = "AWS_SECRET_ACCESS_KEY=planted-in-an-untracked-file"


def _dirty_checkout(folder: Path) -> tuple[Path, str, str]:
    """A clone of this repository's HEAD with one uncommitted edit and an untracked `.env` holding
    SECRET (which no upload may carry): (checkout, commit, edit)."""
    subprocess.run(["git", "clone", "-q", "--no-local", str(REPO), str(folder)], check=True, timeout=120)
    edit = "<!-- an uncommitted edit the submitted study's provenance must carry -->"
    with open(folder / "README.md", "a", encoding="utf-8") as readme:
        readme.write(edit + "\n")
    (folder / ".env").write_text(SECRET + "\n")
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=folder, capture_output=True, text=True, check=True
    ).stdout.strip()
    return folder, commit, edit


def _what_the_head_unpacked(cluster, temp_dir: str, job_id: str) -> tuple[set[str], str, str, str]:
    """Through the real job server: the files Ray unpacked as the job's working_dir on the head
    (before the entrypoint runs), its README.md and `.vitscale-git.diff`, and the job as the job
    API lists it (GET /api/jobs/, its runtime_env included)."""
    deadline = time.time() + 600
    unpacked = []
    while not unpacked and time.time() < deadline:
        unpacked = list(Path(temp_dir).glob("session_*/runtime_resources/working_dir_files/*/README.md"))
        time.sleep(0.5)
    assert unpacked, _job_status(cluster.dashboard_url, job_id)
    working_dir = unpacked[0].parent
    uploaded = {str(p.relative_to(working_dir)) for p in working_dir.rglob("*") if p.is_file()}
    readme, diff = (working_dir / "README.md").read_text(), (working_dir / ".vitscale-git.diff").read_text()
    with urllib.request.urlopen(f"{cluster.dashboard_url}/api/jobs/", timeout=30) as response:
        listed = response.read().decode()
    return uploaded, readme, diff, listed


@pytest.mark.timeout(1500)
def test_a_submitted_quickstart_outlives_its_cluster_and_resumes_from_the_laptop(
    mlflow_server, tmp_path, monkeypatch
):
    cluster_storage = tmp_path / "cluster-storage"
    checkout, commit, edit = _dirty_checkout(tmp_path / "checkout")
    sets = [arg for item in TINY for arg in ("--set", item)]
    first, second = short_temp_dir(), short_temp_dir()
    try:
        # The cluster's configured storage: its nodes (and so the job's driver) inherit the variable.
        monkeypatch.setenv("VITSCALE_STORAGE_ROOT", str(cluster_storage))
        cluster = start_ray_cluster(first, workers=1, cpus_per_node=1)
        monkeypatch.delenv("VITSCALE_STORAGE_ROOT")
        job_id = vitscale(
            "study", "submit", "studies/quickstart.yaml", "--address", cluster.dashboard_url,
            "--tracking-uri", mlflow_server, *sets, cwd=checkout,
        ).stdout.split()[-1]  # fmt: skip
        uploaded, readme, diff, listed = _what_the_head_unpacked(cluster, first, job_id)
        deadline = time.time() + 600
        while _finished(mlflow_server) < 1:
            status = _job_status(cluster.dashboard_url, job_id)
            assert status in ("PENDING", "RUNNING") and time.time() < deadline, vitscale(
                "study", "logs", job_id, "--address", cluster.dashboard_url, cwd=REPO
            ).stdout[-4000:]
            time.sleep(0.5)
        [execution] = list((cluster_storage / "ray_results" / "quickstart").glob("2*"))
        assert not list(Path(first).rglob("ray_results"))  # nothing in Ray's temp dir (working_dir)
    finally:
        stop_ray_cluster(first)  # the head goes mid-study, and its temp dir with it
    # The job got the tracked files with the uncommitted edit and the diff as a file, never the
    # untracked `.env` or `.git`; the job as listed holds neither the secret nor the diff.
    assert edit in readme and edit in diff  # the working tree's code runs; the driver logs the diff
    assert ".env" not in uploaded and not any(name.startswith(".git/") for name in uploaded)
    assert "platform/vitscale/cli/app.py" in uploaded and "studies/quickstart.yaml" in uploaded
    assert job_id in listed and SECRET not in listed and edit not in listed
    [job] = [j for j in json.loads(listed) if j.get("submission_id") == job_id]
    assert job["runtime_env"]["env_vars"]["VITSCALE_GIT_DIFF_FILE"] == ".vitscale-git.diff"

    assert not Path(first).exists() and _finished(mlflow_server) < PLANNED
    assert (execution / "vitscale-study.json").is_file() and list(execution.glob("experiment_state*.json"))
    assert list(execution.glob("*/checkpoint_*")), sorted(p.name for p in execution.iterdir())

    monkeypatch.setenv("VITSCALE_TRACKING_URI", mlflow_server)  # what `study status` reads progress from
    monkeypatch.setenv("COLUMNS", "100")
    try:
        monkeypatch.setenv("VITSCALE_STORAGE_ROOT", str(cluster_storage))
        cluster = start_ray_cluster(second, workers=1, cpus_per_node=1)
        monkeypatch.delenv("VITSCALE_STORAGE_ROOT")
        resume_id = vitscale(
            "study", "resume", "quickstart", "--address", cluster.dashboard_url, cwd=checkout
        ).stdout.split()[-1]  # fmt: skip
        status = _wait_for_job(cluster.dashboard_url, resume_id)
        logs = vitscale("study", "logs", resume_id, "--address", cluster.dashboard_url, cwd=REPO).stdout
        table = vitscale("study", "status", "--address", cluster.dashboard_url, cwd=REPO).stdout
    finally:
        stop_ray_cluster(second)
    assert status == "SUCCEEDED", logs[-4000:]
    assert f"{PLANNED} trials — {PLANNED} finished" in logs.replace("\n", " "), logs[-3000:]
    [line] = [x for x in table.splitlines() if x.startswith(resume_id)]
    assert line.split()[1:3] == ["quickstart", "SUCCEEDED"] and line.split()[-1] == f"{PLANNED}/{PLANNED}"
    assert all(len(x) <= 100 for x in table.splitlines()), table

    runs = child_runs(mlflow_server, "quickstart")
    assert len(runs) == PLANNED and {r.data.tags["vitscale.status"] for r in runs} == {"FINISHED"}
    assert len({r.data.tags["vitscale.trial_id"] for r in runs}) == PLANNED
    cells = Counter((r.data.params["model.mixer"], r.data.params["model.regime"]) for r in runs)
    assert set(cells.values()) == {2}  # every mixer x regime cell once per seed
    assert len(list((cluster_storage / "ray_results" / "quickstart").glob("2*"))) == 1  # resumed, not rerun

    # Provenance: the jobs' working_dir has no .git, yet every run names the submitting checkout.
    [parent] = parent_runs(mlflow_server, "quickstart")
    for run in [parent, *runs]:
        assert run.data.tags["mlflow.source.git.commit"] == commit, run.data.tags
        assert run.data.tags["vitscale.git.dirty"] == "true"
    diff = MlflowClient(tracking_uri=mlflow_server).download_artifacts(
        parent.info.run_id, "git.diff", str(tmp_path)
    )
    assert edit in Path(diff).read_text()
