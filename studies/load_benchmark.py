"""Load benchmark: run a many-trial study (studies/load_1000.yaml), then analyse it, and measure.

Prints wall time, trials per minute, the driver's peak memory and its memory over the run (to see
that it does not grow without bound), the size of the status output, `vitscale analyze` time, and
the slot-time overhead (studies/overhead.py, beside this script). A benchmark, not a test.

    python studies/load_benchmark.py studies/load_1000.yaml [--seeds 25] [--out /tmp/load] [--num-cpus 2]

Everything (MLflow store, Ray results, logs, report) goes to --out, default a new temp folder.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


def sample_rss(pid: int, samples: list[tuple[float, int]], stop: threading.Event) -> None:
    """The driver's resident memory (and its high-water mark, VmHWM), once a second, from /proc."""
    t0 = time.time()
    status = Path(f"/proc/{pid}/status")
    while not stop.is_set():
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:
            return
        if "VmHWM" in fields:
            samples.append((time.time() - t0, int(fields["VmRSS"].split()[0]) * 1024))
            PEAK[0] = max(PEAK[0], int(fields["VmHWM"].split()[0]) * 1024)
        stop.wait(1.0)


PEAK = [0]


def env() -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "TUNE_"))}
    out["PYTHONUNBUFFERED"] = "1"
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("study", type=Path)
    parser.add_argument("--seeds", type=int, default=None, help="run with seeds 0..N-1 (4 x N trials)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--num-cpus", type=int, default=None)
    args = parser.parse_args()
    out = (args.out or Path(tempfile.mkdtemp(prefix="vitscale-load-"))).resolve()
    out.mkdir(parents=True, exist_ok=True)
    uri = f"sqlite:///{out / 'mlflow.db'}"
    name = "load_1000" if args.seeds is None else f"load_{4 * args.seeds}"
    sets = (
        []
        if args.seeds is None
        else ["--set", f"name={name}", "--set", f"search.seeds={list(range(args.seeds))}"]
    )
    cmd = [sys.executable, "-m", "vitscale", "study", "run", str(args.study.resolve()), "--tracking-uri", uri]
    cmd += ["--storage", str(out / "results"), *sets]
    if args.num_cpus:
        cmd += ["--num-cpus", str(args.num_cpus)]
    log = out / "study.log"
    print("$", " ".join(cmd), f"> {log}", flush=True)
    t0 = time.time()
    with log.open("w") as handle:
        proc = subprocess.Popen(cmd, cwd=out, env=env(), stdout=handle, stderr=subprocess.STDOUT)
        samples: list[tuple[float, int]] = []
        stop = threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(proc.pid, samples, stop), daemon=True)
        sampler.start()
        code = proc.wait()
        stop.set()
        sampler.join()
    wall = time.time() - t0
    if code != 0:
        print(log.read_text()[-3000:])
        print(f"study run failed with exit code {code}")
        return code

    t1 = time.time()
    analyze = subprocess.run(
        [
            sys.executable,
            "-m",
            "vitscale",
            "analyze",
            name,
            "--tracking-uri",
            uri,
            "--out",
            str(out / "report"),
        ],
        cwd=out,
        env=env(),
        capture_output=True,
        text=True,
    )
    analyze_s = time.time() - t1
    if analyze.returncode != 0:
        print(analyze.stdout[-2000:], analyze.stderr[-2000:])

    from overhead import measure  # studies/overhead.py: this script's folder is on sys.path

    from vitscale.tracking import store

    overhead = measure(store.client_for(uri), name)
    rss = [r for _, r in samples]
    quarters = (
        [rss[min(len(rss) - 1, int(q * len(rss)))] for q in (0.25, 0.5, 0.75)] + [rss[-1]] if rss else []
    )
    text = log.read_text()
    result = {
        "study": name,
        "trials": overhead.trials,
        "wall_s": round(wall, 1),
        "trials_per_minute": round(60 * overhead.trials / wall, 1),
        "driver_peak_rss_mb": round(max(PEAK[0], *rss) / 2**20, 1) if rss else None,
        "driver_rss_mb_at_25_50_75_100pct_of_wall": [round(r / 2**20, 1) for r in quarters],
        "status_output_lines": text.count("\n"),
        "status_output_kb": round(len(text.encode()) / 1024, 1),
        "analyze_s": round(analyze_s, 1),
        "analyze_ok": analyze.returncode == 0,
        "in_epochs_share_of_slot_time": round(overhead.share, 3),
        "mean_trial_s": round(overhead.mean_trial_s, 2),
        "before_first_trial_s": round(overhead.before_first_trial_s, 1),
        "out": str(out),
    }
    (out / "load_benchmark.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if analyze.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
