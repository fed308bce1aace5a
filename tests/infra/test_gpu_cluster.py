"""Fractional GPUs and GPU preflight without a GPU: a local two-node cluster whose nodes advertise
two logical GPUs each (`ray-up.sh --gpus-per-node 2`, i.e. `ray start --num-gpus 2`). Ray places
and isolates trials by those GPUs exactly as on real ones; torch inside sees no CUDA device. Also:
ray-up.sh restarts on the ports ray-down.sh just released."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS), str(TESTS / "tune")]
pytest_plugins = ["fixtures_cluster"]

from study_helpers import child_runs, cli_env, vitscale, write_study  # noqa: E402

pytestmark = pytest.mark.slow

PROBE = textwrap.dedent(
    """
    import json, os, sys, ray
    ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)

    @ray.remote(num_cpus=1, num_gpus=0.5)  # what a trial with resources {cpu: 1, gpu: 0.5} asks for
    def where():
        import time, torch
        time.sleep(2)  # held together: two at a time per node share one GPU
        return {"node": ray.get_runtime_context().get_node_id(), "gpus": ray.get_gpu_ids(),
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "cuda": torch.cuda.is_available()}

    print(json.dumps(ray.get([where.remote() for _ in range(4)])))
    """
)


def _up(temp_dir: str, port: int, dashboard: int):
    from fixtures_cluster import LOCAL, _run

    out = _run(
        [str(LOCAL / "ray-up.sh"), "--workers", "1", "--cpus-per-node", "2", "--gpus-per-node", "2",
         "--port", str(port), "--dashboard-port", str(dashboard), "--temp-dir", temp_dir,
         "--object-store-mb", "256", "--timeout", "300"],
        timeout=1000,
    )  # fmt: skip
    return out["RAY_ADDRESS"]


@pytest.fixture(scope="module")
def gpu_cluster(request):
    from fixtures_cluster import free_port, short_temp_dir, stop_ray_cluster

    temp_dir, port, dashboard = short_temp_dir(), free_port(), free_port()
    request.addfinalizer(lambda: stop_ray_cluster(temp_dir))
    return _up(temp_dir, port, dashboard), temp_dir, port, dashboard


def test_half_gpu_trials_are_packed_two_per_gpu_and_see_only_their_gpu(gpu_cluster):
    address = gpu_cluster[0]
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, address],
        capture_output=True,
        text=True,
        timeout=300,
        env={**cli_env(), "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},  # a plain client of a loopback cluster
        cwd="/tmp",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    placed = json.loads(proc.stdout.strip().splitlines()[-1])
    for p in placed:
        assert len(p["gpus"]) == 1 and p["visible"] == str(p["gpus"][0]), p  # one GPU, and only it
        assert p["cuda"] is False  # logical GPUs: torch sees no device
    per_gpu: dict[tuple, int] = {}
    for p in placed:
        per_gpu[(p["node"], p["visible"])] = per_gpu.get((p["node"], p["visible"]), 0) + 1
    assert sorted(per_gpu.values()) == [2, 2]  # 4 half-GPU tasks held at once: two per GPU


def test_a_cuda_trial_on_a_gpu_node_without_cuda_fails_clearly_not_hangs(gpu_cluster, tmp_path):
    """The preflight passes (the nodes advertise GPUs); the trial then finds no CUDA device and is
    recorded FAILED with the reason; the study ends."""
    address = gpu_cluster[0]
    study = write_study(
        tmp_path, "gpu-cluster", search={"algorithm": "grid"}, resources={"cpu": 1, "gpu": 0.5}
    )
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["study", "run", str(study), "--address", address, "--tracking-uri", uri]
    args += ["--storage", str(tmp_path / "results"), "--quiet", "--set", "trial.train.device=cuda"]
    proc = vitscale(*args, cwd=tmp_path, timeout=600, check=False)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    [run] = child_runs(uri, "gpu-cluster")
    assert run.data.tags["vitscale.status"] == "FAILED", proc.stdout[-3000:]
    assert "CUDA is not available" in run.data.tags["vitscale.failure_reason"]

    # Asking for more GPUs than any node has is refused before anything starts, in one line.
    proc = vitscale(*args, "--set", "resources.gpu=3", cwd=tmp_path, timeout=600, check=False)
    assert proc.returncode == 2 and "3 GPU" in proc.stderr and "Traceback" not in proc.stderr


def test_ray_up_restarts_on_the_ports_ray_down_just_released(gpu_cluster):
    from fixtures_cluster import LOCAL, _run

    _, temp_dir, port, dashboard = gpu_cluster
    _run([str(LOCAL / "ray-down.sh"), "--temp-dir", temp_dir, "--grace", "3"], timeout=120)
    address = _up(temp_dir, port, dashboard)  # at once: no "port in use" from TIME_WAIT
    assert address == f"127.0.0.1:{port}"
