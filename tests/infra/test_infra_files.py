"""infra/: the files for machines this one cannot run (Docker, Kubernetes, cloud clusters) are
parsed and checked against the formats they target; the local scripts' syntax and error paths."""

from __future__ import annotations

import copy
import json
import re
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

import jsonschema
import pytest
import ray
import ray.autoscaler
import yaml

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
LAUNCHER_CONFIGS = sorted((INFRA / "ray").glob("*.yaml"))
SCRIPTS = sorted((INFRA / "local").glob("*.sh"))
IMAGE = "registry.example.com/replace-me/vitscale:latest"


def load(path: Path):
    return yaml.safe_load(path.read_text())


def ray_schema() -> dict:
    return json.loads((Path(ray.autoscaler.__file__).parent / "ray-schema.json").read_text())


def test_every_yaml_under_infra_parses():
    files = sorted(INFRA.rglob("*.yaml")) + sorted(INFRA.rglob("*.yml"))
    assert len(files) >= 5
    for path in files:
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        assert docs, f"{path}: empty"


# ---- Ray cluster launcher -------------------------------------------------------------------------


def test_launcher_configs_exist():
    assert {p.name for p in LAUNCHER_CONFIGS} == {"aws-gpu.yaml", "gcp-gpu.yaml"}


@pytest.mark.parametrize("path", LAUNCHER_CONFIGS, ids=lambda p: p.name)
def test_launcher_config_valid_for_ray_schema(path):
    """The schema shipped with ray, on the file as written and after Ray's own `ray up` preparation
    (defaults merged, setup commands merged, docker config checked, then validate_config)."""
    from ray.autoscaler._private.util import prepare_config, validate_config

    config = load(path)
    jsonschema.validate(config, ray_schema())
    prepared = prepare_config(copy.deepcopy(config))
    validate_config(prepared)
    assert prepared["provider"]["type"] in {"aws", "gcp"}


def test_ray_schema_rejects_a_misspelled_key():
    config = load(INFRA / "ray" / "aws-gpu.yaml")
    config["available_node_type"] = config.pop("available_node_types")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(config, ray_schema())


@pytest.mark.parametrize("path", LAUNCHER_CONFIGS, ids=lambda p: p.name)
def test_launcher_config_shape(path):
    config = load(path)
    types = config["available_node_types"]
    head = types[config["head_node_type"]]
    assert head["resources"].get("GPU", 0) == 0, "the head is a CPU node"
    workers = {name: t for name, t in types.items() if name != config["head_node_type"]}
    gpu_types = [t for t in workers.values() if t["resources"].get("GPU", 0) >= 1]
    assert gpu_types, "at least one GPU worker type"
    for t in gpu_types:
        assert 0 <= t["min_workers"] <= t["max_workers"] <= config["max_workers"]
        # The paper studies ask for {cpu: 8, gpu: 1} per trial: every GPU must come with 8 CPUs.
        assert t["resources"]["CPU"] >= 8 * t["resources"]["GPU"]
    assert sum(t.get("min_workers", 0) for t in workers.values()) <= config["max_workers"]

    assert config["docker"]["image"] == IMAGE
    run_options = " ".join(config["docker"]["run_options"])
    assert "VITSCALE_TRACKING_URI=" in run_options
    assert config["file_mounts"] == {"/home/ray/vitscale": "."}
    assert ".venv" in config["rsync_exclude"]
    assert any("pip install" in c and "-e /home/ray/vitscale" in c for c in config["setup_commands"])

    head_start = " ".join(config["head_start_ray_commands"])
    assert "ray start --head" in head_start
    assert "--dashboard-host=0.0.0.0" in head_start and "--dashboard-port=8265" in head_start
    assert "--autoscaling-config=~/ray_bootstrap_config.yaml" in head_start
    assert "--address=$RAY_HEAD_IP:6379" in " ".join(config["worker_start_ray_commands"])


# ---- KubeRay --------------------------------------------------------------------------------------


def check_ray_cluster_spec(spec: dict) -> None:
    assert spec["rayVersion"] == ray.__version__, "rayVersion must be the Ray the project runs"
    head = spec["headGroupSpec"]
    assert head["rayStartParams"]["dashboard-host"] == "0.0.0.0"
    assert head["serviceType"] == "ClusterIP"
    head_container = head["template"]["spec"]["containers"][0]
    assert head_container["image"] == IMAGE
    assert {p["containerPort"] for p in head_container["ports"]} >= {6379, 8265}
    assert "nvidia.com/gpu" not in head_container["resources"]["limits"]

    groups = spec["workerGroupSpecs"]
    assert groups
    for group in groups:
        assert group["groupName"]
        assert group["minReplicas"] <= group["replicas"] <= group["maxReplicas"]
        assert "rayStartParams" in group
        container = group["template"]["spec"]["containers"][0]
        assert container["image"] == IMAGE
        limits = container["resources"]["limits"]
        assert int(limits["nvidia.com/gpu"]) >= 1
        assert int(limits["cpu"]) >= 8 * int(limits["nvidia.com/gpu"])


def test_kuberay_raycluster():
    docs = list(yaml.safe_load_all((INFRA / "k8s" / "raycluster.yaml").read_text()))
    assert len(docs) == 1
    doc = docs[0]
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == "RayCluster"
    assert doc["metadata"]["name"]
    check_ray_cluster_spec(doc["spec"])
    env = {
        e["name"]: e["value"]
        for e in doc["spec"]["headGroupSpec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["VITSCALE_TRACKING_URI"].startswith("http://")


def test_kuberay_rayjob_runs_a_study():
    doc = load(INFRA / "k8s" / "rayjob.yaml")
    assert doc["apiVersion"] == "ray.io/v1"
    assert doc["kind"] == "RayJob"
    spec = doc["spec"]
    entrypoint = spec["entrypoint"]
    assert entrypoint.startswith("vitscale study run ")
    assert "--address auto" in entrypoint
    study = entrypoint.split()[3]
    assert (REPO / study).is_file(), f"the RayJob runs {study}, which is not in the repo"
    # KubeRay pastes the entrypoint into the submitter pod's shell line: nothing it would interpret.
    assert not re.search(r"[;&|$`]", entrypoint)
    runtime_env = yaml.safe_load(spec["runtimeEnvYAML"])
    assert runtime_env["working_dir"] == "/home/ray/vitscale"
    assert runtime_env["env_vars"]["VITSCALE_TRACKING_URI"].startswith("http://")
    assert spec["shutdownAfterJobFinishes"] is True
    assert spec["ttlSecondsAfterFinished"] >= 0
    check_ray_cluster_spec(spec["rayClusterSpec"])


# ---- Docker ---------------------------------------------------------------------------------------


def test_dockerfile():
    """The image installs the tested versions (constraints.txt: torch 2.13.0, this Ray), carries the
    commit it was built from, and runs as a non-root user. PyPI's Linux torch wheel is the CUDA build."""
    text = (INFRA / "docker" / "Dockerfile").read_text()
    base = re.search(r"^ARG BASE_IMAGE=(\S+)", text, re.M).group(1)
    assert base.startswith("python:3.11")
    assert re.search(r"^FROM \$\{BASE_IMAGE\}", text, re.M)
    assert re.search(r"pip install -c constraints.txt torch==2\.13\.0", text)
    assert re.search(r"pip install .*-c constraints.txt -e ", text)
    assert re.search(r"^ARG GIT_COMMIT=", text, re.M) and "VITSCALE_GIT_COMMIT=${GIT_COMMIT}" in text
    constraints = (REPO / "constraints.txt").read_text()
    assert re.search(rf"^ray(\[[^\]]*\])?=={re.escape(ray.__version__)}$", constraints, re.M)
    users = re.findall(r"^USER (\S+)", text, re.M)
    assert users and users[-1] not in {"root", "0"}
    assert re.search(r"^WORKDIR /home/ray/vitscale$", text, re.M)


def test_dockerignore_keeps_local_state_out():
    patterns = {
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    assert {".venv", "mlflow.db", "ray_results", "reports", "data", ".git"} <= patterns
    # `data` must only match the top-level folder, not the package platform/vitscale/data.
    assert not any(p.startswith("**/data") for p in patterns)


# ---- MLflow server compose ------------------------------------------------------------------------


def test_mlflow_compose():
    compose = load(INFRA / "mlflow" / "docker-compose.yaml")
    services = compose["services"]
    assert {"postgres", "minio", "minio-init", "mlflow"} <= set(services)

    command = services["mlflow"]["command"]
    assert command[:2] == ["mlflow", "server"]
    joined = " ".join(command)
    assert "--backend-store-uri postgresql://" in joined and "@postgres:5432/" in joined
    assert "--artifacts-destination s3://" in joined
    assert "--serve-artifacts" in command
    assert services["mlflow"]["environment"]["MLFLOW_S3_ENDPOINT_URL"] == "http://minio:9000"
    assert services["mlflow"]["depends_on"] == {
        "postgres": {"condition": "service_healthy"},
        "minio-init": {"condition": "service_completed_successfully"},
    }
    assert services["minio-init"]["depends_on"]["minio"]["condition"] == "service_healthy"
    assert "mc mb" in " ".join(services["minio-init"]["command"])
    for name in ("postgres", "minio", "mlflow"):
        assert services[name]["healthcheck"]["test"], name
    # Published ports default to loopback.
    for name, service in services.items():
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:") or port.startswith("${MLFLOW_BIND:-127.0.0.1}:"), name


def test_mlflow_env_example_defines_every_compose_variable():
    text = (INFRA / "mlflow" / "docker-compose.yaml").read_text()
    used = set(re.findall(r"(?<!\$)\$\{([A-Z_]+)", text))
    example = (INFRA / "mlflow" / ".env.example").read_text()
    defined = set(re.findall(r"^([A-Z_]+)=", example, re.M))
    assert used <= defined, f"not in .env.example: {sorted(used - defined)}"


# ---- local scripts (syntax and error paths; the services themselves: test_local_scripts.py) ------


def test_local_scripts_present_and_executable():
    names = {p.name for p in SCRIPTS}
    assert {"ray-up.sh", "ray-down.sh", "mlflow-up.sh", "mlflow-down.sh", "_common.sh"} <= names
    for path in SCRIPTS:
        if not path.name.startswith("_"):
            assert path.stat().st_mode & 0o111, f"{path.name} is not executable"
            assert path.read_text().startswith("#!/usr/bin/env bash\n")
            assert "set -euo pipefail" in path.read_text()


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_script_syntax(path):
    subprocess.run(["bash", "-n", str(path)], check=True)


def run_script(name: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(INFRA / "local" / name), *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


@pytest.mark.parametrize("name", ["ray-up.sh", "ray-down.sh", "mlflow-up.sh", "mlflow-down.sh"])
def test_script_rejects_unknown_argument(name):
    proc = run_script(name, "--bogus")
    assert proc.returncode == 2
    assert "error: unknown argument '--bogus'" in proc.stderr
    assert "usage:" in proc.stderr


def test_up_scripts_refuse_a_busy_port(tmp_path):
    temp_dir = tempfile.mkdtemp(prefix="vsr-", dir="/tmp")
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            port = str(s.getsockname()[1])
            proc = run_script("ray-up.sh", "--port", port, "--temp-dir", temp_dir)
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.strip().splitlines() == [
                f"error: --port {port} is in use on 127.0.0.1; pick another (or stop what holds it)"
            ]
            proc = run_script("mlflow-up.sh", "--port", port, "--state-dir", str(tmp_path))
            assert proc.returncode == 2, proc.stderr
            assert proc.stderr.strip().splitlines() == [
                f"error: --port {port} is in use on 127.0.0.1; pick another (or stop what holds it)"
            ]
    finally:
        shutil.rmtree(temp_dir, ignore_errors=True)


def test_ray_up_refuses_a_long_temp_dir(tmp_path):
    long_dir = tmp_path / ("x" * 60)
    proc = run_script("ray-up.sh", "--temp-dir", str(long_dir))
    assert proc.returncode == 2
    assert "is too long" in proc.stderr and "107" in proc.stderr


def test_ray_up_rejects_an_unknown_auth_mode():
    proc = run_script("ray-up.sh", "--auth", "maybe")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --auth expects 'disabled' or 'token', got 'maybe'"


def test_down_scripts_are_noops_when_nothing_runs(tmp_path):
    proc = run_script("ray-down.sh", "--temp-dir", str(tmp_path / "absent"))
    assert proc.returncode == 0 and "nothing to stop" in proc.stderr
    proc = run_script("ray-down.sh", "--temp-dir", str(tmp_path))  # exists, but no cluster
    assert proc.returncode == 0 and "nothing to stop" in proc.stderr
    proc = run_script("mlflow-down.sh", "--port", "1", "--state-dir", str(tmp_path))
    assert proc.returncode == 0 and "nothing to stop" in proc.stderr
