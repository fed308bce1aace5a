"""The scheduler at cluster scale, simulated on one machine (issue 36):

    python -m vitscale.tune.cluster_scale --nodes 16 --trials 1000 --workers 2 --gpu 1

starts a real Ray cluster of `--nodes` nodes here (`ray.cluster_utils.Cluster`: a raylet per node,
each with logical CPUs and GPUs), runs a `kind: simulated` study of `--trials` multi-worker trials
on it with `tune.run.run_study` (random search over seeds as replicates, FIFO, MLflow in a SQLite
store beside it: the driver's real path), and measures

- placement: the nodes each trial's worker bundles span (`nodes_spanned`, logged per trial)
  against the fewest nodes that hold them;
- idle GPUs while trials wait: every `--sample-s` the driver's trial counts (its progress record)
  and the placement groups Ray holds, so a GPU free while a trial waits shows;
- the driver's CPU seconds (its process, less this sampler's thread) and resident memory, per trial;
- MLflow writes per second: the rows the store gained (runs, params, tags, metric values) over
  the study's wall time.

A trial is `tune.simulated_trial` (it sleeps `--epoch-s` per epoch), held in the placement group
Ray Train would place (`tune.worker_group`), so nothing trains and 1,000 trials fit on 2 cores.
It prints the figures as one JSON object and writes them to `<out>/result.json`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import ray
import yaml
from ray.cluster_utils import Cluster
from ray.util.placement_group import placement_group_table

from vitscale.study import load_study
from vitscale.tracking.layout import RESULT_NODES_SPANNED
from vitscale.tune import cluster, progress_line
from vitscale.tune import storage as storage_mod
from vitscale.tune.execution_modes import worker_groups_at_once
from vitscale.tune.run import run_study
from vitscale.tune.simulated_kind import NAME, register_simulated_kind
from vitscale.tune.storage import LATEST_FILE

STUDY = "cluster-scale"
# Every node of the simulated cluster shares this machine's cores, so what a real node does on its
# own cores happens here all at once: each raylet starts up to two worker processes at a time and
# gives each 60 s (Ray's default) to register, which 32 starts on 2 cores did not meet (16 nodes:
# "worker startup repeatedly failed"); the storage check starts a process on every node at once.
# The waits are raised for the simulation only; a study on a real cluster keeps Ray's and ours.
ONE_MACHINE_ENV = {"RAY_worker_register_timeout_seconds": "900"}
ONE_MACHINE_PROBE_S = 900.0
MLFLOW_TABLES = ("runs", "params", "tags", "metrics")  # the rows one write adds


@dataclass(frozen=True)
class ClusterShape:
    nodes: int
    cpus_per_node: int  # logical: Ray places by them; nothing computes
    gpus_per_node: int  # logical
    object_store_mb: int = 80


@dataclass(frozen=True)
class TrialShape:
    workers: int
    cpu: float  # per worker
    gpu: float  # per worker
    epochs: int
    epoch_s: float

    def gpus(self) -> float:
        return self.workers * self.gpu

    def nodes_needed(self, shape: ClusterShape) -> int:
        """The fewest nodes that hold this trial's worker bundles."""
        fits = [shape.cpus_per_node // self.cpu if self.cpu else math.inf]
        if self.gpu:
            fits.append(shape.gpus_per_node // self.gpu)
        per_node = min(fits)
        return math.ceil(self.workers / per_node) if per_node >= 1 else 0


@dataclass
class Sample:
    t: float  # seconds since the study started
    running: int  # trials the driver runs (its progress record)
    waiting: int  # trials not started yet (planned - ended - running)
    gpus_reserved: float  # GPUs in placement groups Ray has created
    groups_pending: int  # placement groups Ray has not placed yet
    room_for_a_trial: bool  # GPUs no placement group holds, enough for one more trial where it fits
    driver_rss_mb: float


@dataclass
class Figures:
    nodes: int
    trials: int
    workers: int
    gpus_per_trial: float
    trials_at_once: int
    finished: int
    wall_s: float
    ideal_s: float  # waves of trials at once x epochs x epoch_s: zero scheduling cost
    split_trials: int  # trials spread over more nodes than needed
    max_nodes_spanned: int
    nodes_needed: int
    # over the samples from the first trial's start on in which a trial waits to start:
    idle_gpu_share_while_waiting: float  # the mean share of GPUs no running trial holds
    samples_idle_fit: float  # the share of them with room for one more trial that no group held
    driver_cpu_s: float
    driver_cpu_ms_per_trial: float
    driver_rss_start_mb: float
    driver_rss_peak_mb: float
    driver_rss_kb_per_trial: float
    mlflow_writes: int
    mlflow_writes_per_s: float
    samples: list[Sample] = field(default_factory=list)


def start_cluster(shape: ClusterShape, wait_s: float = 600.0) -> Cluster:
    """`shape.nodes` raylets on 127.0.0.1, without dashboards or prestarted workers. Ray gives a
    raylet 30 s (fixed) to register; on a loaded machine it takes longer and registers after
    `add_node` gave up, so the nodes are counted as the GCS lists them, up to `wait_s`."""
    for key, value in {**cluster.DRIVER_ENV, **ONE_MACHINE_ENV}.items():  # read by each raylet
        os.environ.setdefault(key, value)
    storage_mod.PROBE_TIMEOUT_S = max(storage_mod.PROBE_TIMEOUT_S, ONE_MACHINE_PROBE_S)
    cluster.bind_loopback(True)
    node = dict(
        num_cpus=shape.cpus_per_node,
        num_gpus=shape.gpus_per_node,
        object_store_memory=shape.object_store_mb * 2**20,
        node_ip_address="127.0.0.1",
    )
    ray_cluster = _start_head({**node, "include_dashboard": False})
    try:
        for count in range(2, shape.nodes + 1):
            try:
                ray_cluster.add_node(**node)
            except Exception:  # noqa: BLE001 - its raylet still starts: counted below
                pass
            _wait_for(ray_cluster, count, wait_s)
    except BaseException:
        stop_cluster(ray_cluster)
        raise
    return ray_cluster


def _wait_for(ray_cluster: Cluster, count: int, wait_s: float) -> None:
    deadline = time.monotonic() + wait_s
    while len(ray_cluster.global_state._live_node_ids()) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"--nodes: only {len(ray_cluster.global_state._live_node_ids())} of {count} nodes up"
            )
        time.sleep(1.0)


def _start_head(head: dict, tries: int = 3) -> Cluster:
    """The head node (GCS and its raylet), started again where Ray gave up on it."""
    for _ in range(tries - 1):
        try:
            return Cluster(initialize_head=True, head_node_args=head)
        except Exception:  # noqa: BLE001 - Ray's 30 s for the head's raylet ran out: once more
            _stop_children()  # what the failed start left running
    return Cluster(initialize_head=True, head_node_args=head)


def stop_cluster(ray_cluster: Cluster) -> None:
    """Stop the nodes, those `add_node` gave up on too (this process's children)."""
    ray_cluster.shutdown()
    _stop_children()


def _stop_children() -> None:
    listed = subprocess.run(["ps", "-o", "pid=", "--ppid", str(os.getpid())], capture_output=True, text=True)
    for pid in listed.stdout.split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), signal.SIGTERM)


def study_file(out: Path, trials: int, seeds: int, trial: TrialShape) -> Path:
    """The simulated study: `trials` = points x seeds over a log-uniform lr, as a study file."""
    study = {
        "name": STUDY,
        "kind": NAME,
        "description": "The scheduler at cluster scale: simulated multi-worker trials.",
        "trial": {
            "model": {"width": 16, "depth": 1, "heads": 2, "patch_size": 4},
            "data": {"dataset": "digits", "resolution": 16},
            "train": {"epochs": trial.epochs},
        },
        "space": {"train.lr": {"loguniform": [1.0e-4, 1.0e-2]}},
        "search": {"algorithm": "random", "num_samples": trials // seeds, "seeds": list(range(seeds))},
        "objectives": [{"metric": "val_top1", "mode": "max"}],
        "scheduler": {"type": "fifo"},
        "resources": {"workers": trial.workers, "cpu": trial.cpu, "gpu": trial.gpu},
        "failure": {"max_failures": 0},
    }
    path = out / "cluster-scale.yaml"
    path.write_text(yaml.safe_dump(study, sort_keys=False))
    return path


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


class Sampler(threading.Thread):
    """Every `every_s`: the driver's trial counts and the GPUs Ray's placement groups hold."""

    def __init__(self, storage: Path, planned: int, every_s: float, shape: ClusterShape, trial: TrialShape):
        super().__init__(name="vitscale-cluster-sampler", daemon=True)
        self.storage, self.planned, self.every_s = storage, planned, every_s
        self.shape, self.trial = shape, trial
        self.samples: list[Sample] = []
        self.cpu_s = 0.0  # this thread's own CPU time, left out of the driver's
        self.started = time.monotonic()
        self._halt = threading.Event()

    def _execution(self) -> Path | None:
        latest = self.storage / STUDY / LATEST_FILE
        return self.storage / STUDY / latest.read_text().strip() if latest.is_file() else None

    def sample(self) -> None:
        directory = self._execution()
        record = progress_line.read(directory) if directory else None
        if record is None or not ray.is_initialized():
            return
        snapshot = record.snapshot
        gpus, pending, held = 0.0, 0, {}
        for group in placement_group_table().values():
            if group["state"] == "CREATED":
                for index, bundle in group["bundles"].items():
                    node = group["bundles_to_node_id"][index]
                    held[node] = held.get(node, 0.0) + bundle.get("GPU", 0.0)
                    gpus += bundle.get("GPU", 0.0)
            elif group["state"] == "PENDING":
                pending += 1
        free = [
            self.shape.gpus_per_node - held.get(node["NodeID"], 0.0) for node in ray.nodes() if node["Alive"]
        ]
        need = self.trial.gpus()
        room = max(free, default=0) >= need if self.trial.nodes_needed(self.shape) == 1 else sum(free) >= need
        running = snapshot.running
        waiting = max(0, self.planned - snapshot.done - snapshot.failed - running)
        at = time.monotonic() - self.started
        self.samples.append(Sample(round(at, 2), running, waiting, gpus, pending, room, round(_rss_mb(), 1)))

    def run(self) -> None:
        while not self._halt.wait(self.every_s):
            try:
                self.sample()
            except Exception:  # noqa: BLE001 - a sample missed while Ray starts or stops
                pass
            self.cpu_s = time.thread_time()

    def stop(self) -> None:
        self._halt.set()
        self.join()


def mlflow_rows(db: Path) -> int:
    """Rows of the store's runs, params, tags and metric values (0 before it exists)."""
    if not db.is_file():
        return 0
    with sqlite3.connect(db) as con:
        return sum(con.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] for table in MLFLOW_TABLES)


def nodes_spanned(db: Path) -> list[int]:
    """Each trial's `nodes_spanned`, as its child run logged it."""
    with sqlite3.connect(db) as con:
        rows = con.execute("SELECT value FROM latest_metrics WHERE key = ?", (RESULT_NODES_SPANNED,))
        return [int(value) for (value,) in rows]


def measure(shape: ClusterShape, trial: TrialShape, trials: int, seeds: int, out: Path, sample_s: float):
    """Run the simulated study on a fresh cluster of `shape`; its figures."""
    out.mkdir(parents=True, exist_ok=True)
    trials = trials // seeds * seeds  # whole points
    register_simulated_kind(trial.epoch_s)
    spec = load_study(study_file(out, trials, seeds, trial))
    db, storage = out / "mlflow.db", out / "ray"
    ray_cluster = start_cluster(shape)
    try:
        rss_start, rows_before = _rss_mb(), mlflow_rows(db)
        sampler = Sampler(storage, trials, sample_s, shape, trial)
        sampler.start()
        cpu_before, started = time.process_time(), time.monotonic()
        summary = run_study(
            spec, address=ray_cluster.address, tracking_uri=f"sqlite:///{db}", storage=str(storage), verbose=0
        )
        wall_s = time.monotonic() - started
        cpu_s = time.process_time() - cpu_before
        at_once = min(trials, worker_groups_at_once(spec))  # as the tuner capped them
        sampler.stop()
    finally:
        ray.shutdown()
        stop_cluster(ray_cluster)
    driver_cpu_s = max(0.0, cpu_s - sampler.cpu_s)
    spans = nodes_spanned(db)
    needed = trial.nodes_needed(shape)
    total_gpus = shape.nodes * shape.gpus_per_node
    # from the first trial's start (before it: Ray's workers and the MLflow parent run start up)
    first = next((i for i, s in enumerate(sampler.samples) if s.running), len(sampler.samples))
    waiting = [s for s in sampler.samples[first:] if s.waiting > 0]
    idle_share = [(total_gpus - s.running * trial.gpus()) / total_gpus for s in waiting]
    idle_fit = [s for s in waiting if s.room_for_a_trial]
    writes = mlflow_rows(db) - rows_before
    peak = max([_peak_rss_mb(), *(s.driver_rss_mb for s in sampler.samples)])
    return Figures(
        nodes=shape.nodes,
        trials=trials,
        workers=trial.workers,
        gpus_per_trial=trial.gpus(),
        trials_at_once=at_once,
        finished=summary.counts.get("finished", 0),
        wall_s=round(wall_s, 1),
        ideal_s=math.ceil(trials / at_once) * trial.epochs * trial.epoch_s,
        split_trials=sum(span > needed for span in spans),
        max_nodes_spanned=max(spans, default=0),
        nodes_needed=needed,
        idle_gpu_share_while_waiting=round(sum(idle_share) / len(idle_share), 3) if idle_share else 0.0,
        samples_idle_fit=round(len(idle_fit) / len(waiting), 3) if waiting else 0.0,
        driver_cpu_s=round(driver_cpu_s, 1),
        driver_cpu_ms_per_trial=round(1000 * driver_cpu_s / trials, 1),
        driver_rss_start_mb=round(rss_start, 1),
        driver_rss_peak_mb=round(peak, 1),
        driver_rss_kb_per_trial=round(1024 * (peak - rss_start) / trials, 1),
        mlflow_writes=writes,
        mlflow_writes_per_s=round(writes / wall_s, 1),
        samples=sampler.samples,
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m vitscale.tune.cluster_scale", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--nodes", type=int, default=4, help="Ray nodes to start on this machine")
    parser.add_argument("--cpus-per-node", type=int, default=8, help="logical CPUs per node")
    parser.add_argument("--gpus-per-node", type=int, default=8, help="logical GPUs per node")
    parser.add_argument("--trials", type=int, default=100, help="trials: (trials / seeds) points x seeds")
    parser.add_argument("--seeds", type=int, default=2, help="replicates per point")
    parser.add_argument("--workers", type=int, default=2, help="workers per trial (resources.workers)")
    parser.add_argument("--cpu", type=float, default=1.0, help="CPUs per worker (resources.cpu)")
    parser.add_argument("--gpu", type=float, default=1.0, help="GPUs per worker (resources.gpu)")
    parser.add_argument("--epochs", type=int, default=3, help="epochs per trial")
    parser.add_argument("--epoch-s", type=float, default=1.0, help="seconds per simulated epoch")
    parser.add_argument("--sample-s", type=float, default=1.0, help="seconds between samples of the cluster")
    parser.add_argument(
        "--out", type=Path, default=Path("cluster-scale"), help="folder for the store and result.json"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    shape = ClusterShape(args.nodes, args.cpus_per_node, args.gpus_per_node)
    trial = TrialShape(args.workers, args.cpu, args.gpu, args.epochs, args.epoch_s)
    figures = measure(shape, trial, args.trials, args.seeds, args.out.resolve(), args.sample_s)
    record = asdict(figures)
    (args.out / "result.json").write_text(json.dumps(record, indent=1))
    record.pop("samples")
    print(json.dumps(record), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
