"""`vitscale study status` without a job server: studies of a storage folder, from their real
execution records and a real MLflow store (written here as a driver writes them; no Ray)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

from mlflow import MlflowClient
from study_helpers import cli_env, write_study
from test_comparison import COMPARISON

from vitscale.cli import main
from vitscale.study import load_study
from vitscale.tracking import layout
from vitscale.tracking.seed_mean import ConfigMean
from vitscale.tune import local_status, progress_line
from vitscale.tune.progress_line import Snapshot, StudyCount
from vitscale.tune.run import StudyExecution

NOW_MS = int(time.time() * 1000)


def record_study(work: Path, spec, trials: list[dict], planned: int, parent_status="RUNNING") -> Path:
    """An execution folder and its MLflow runs as `study run` leaves them (relative SQLite URI)."""
    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    experiment = client.get_experiment_by_name(spec.name)
    experiment_id = experiment.experiment_id if experiment else client.create_experiment(spec.name)
    tags = {layout.ROLE: "study", layout.STUDY: spec.name, layout.PLANNED_TRIALS: str(planned)}
    parent = client.create_run(experiment_id, tags=tags, start_time=NOW_MS - 600_000).info.run_id
    if parent_status != "RUNNING":
        client.set_terminated(parent, parent_status, end_time=NOW_MS - 60_000)
    for i, t in enumerate(trials):
        child_tags = {
            layout.ROLE: "trial",
            layout.PARENT_RUN_ID: parent,
            layout.STATUS: t["status"],
            layout.CONFIG_KEY: t["params"]["model.mixer"],
            **t.get("tags", {}),
        }
        start = NOW_MS - 500_000 + i * 60_000  # one after another, 60 s each
        run = client.create_run(experiment_id, tags=child_tags, start_time=start).info.run_id
        for key, value in t["params"].items():
            client.log_param(run, key, value)
        for key, value in t.get("metrics", {}).items():
            client.log_metric(run, key, value)
        if t["status"] != "RUNNING":
            client.set_terminated(run, t["status"], end_time=start + 60_000)
    directory = work / "ray_results" / spec.name / "20260101-120000"
    directory.mkdir(parents=True)
    StudyExecution(directory, spec, "sqlite:///mlflow.db", experiment_id, parent).save()
    return directory


def trial(mixer, seed, status="FINISHED", val=None, **extra):
    metrics = {} if val is None else {"val_top1": val}
    return {
        "status": status,
        "params": {"model.mixer": mixer, "train.seed": str(seed)},
        "metrics": metrics,
        **extra,
    }


def test_status_lists_local_studies_with_counts_best_seed_mean_and_eta(tmp_path, monkeypatch, capsys):
    work = tmp_path / "work"
    work.mkdir()
    space = {"model.mixer": {"grid": ["attention", "ssog"]}}
    spec = load_study(
        write_study(tmp_path, "local-tiny", space=space, search={"algorithm": "grid", "seeds": [0, 1, 2]})
    )
    trials = [
        trial("attention", 0, val=0.70),
        trial("attention", 1, val=0.74),
        trial("ssog", 0, val=0.69),
        trial("ssog", 1, status="FAILED"),
        trial("ssog", 2, status="RUNNING"),
    ]
    record_study(work, spec, trials, planned=6)
    comparison = load_study(write_study(tmp_path, "cmp-local", **COMPARISON))
    arm = layout.arm_key({"model.mixer": "ssog"})
    running_tune = trial("ssog", 0, status="RUNNING", tags={layout.PHASE: "tune", layout.ARM: arm})
    record_study(work, comparison, [trial("attention", 0, val=0.5), running_tune], planned=8)
    broken = work / "ray_results" / "broken" / "20260101-000000"
    broken.mkdir(parents=True)
    (broken / "vitscale-study.json").write_text("{not json")
    (broken.parent / "latest").write_text(broken.name + "\n")

    monkeypatch.chdir(tmp_path)  # another terminal, elsewhere: the relative store is found beside the storage
    main(["study", "status", "--storage", "work/ray_results"])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3, lines
    broken_line, comparison_line, line = lines
    assert broken_line.startswith("[broken] ") and "cannot read this execution's record" in broken_line
    assert re.match(
        r"\[local-tiny\] 3/6 done · 1 running · 1 failed · best val_top1 0\.720 \(n=2\) attention · "
        r"updated \S+ ago · ETA 2m00s · running \(execution 20260101-120000\)$",
        line,
    ), line  # ETA: 240 s for the 4 ended trials, 60 s each, x 2 left
    assert comparison_line.startswith("[cmp-local] tune arm 2/2 ssog  1/8 done · 1 running · 0 failed"), (
        comparison_line
    )
    assert "best val_top1 –" in comparison_line  # no final runs yet: tuning runs are never "best"
    assert not (tmp_path / "mlflow.db").exists()  # never a new empty store

    main(["study", "status", "local-tiny", "--storage", "work/ray_results"])
    assert capsys.readouterr().out.startswith("[local-tiny] 3/6 done")


def test_a_finished_study_has_no_eta_and_a_missing_store_is_one_line(tmp_path, monkeypatch, capsys):
    spec = load_study(write_study(tmp_path, "done-tiny", search={"algorithm": "grid", "seeds": [0]}))
    record_study(tmp_path, spec, [trial("attention", 0, val=0.6)], planned=1, parent_status="FINISHED")
    # Where `study run` ran: the record's store is relative to it. (From the checkout, the store
    # `make demo` leaves there was read instead.)
    monkeypatch.chdir(tmp_path)
    [study] = local_status.local_studies(str(tmp_path / "ray_results"))
    assert study.line().startswith("[done-tiny] 1/1 done · 0 running · 0 failed · best val_top1 0.600 (n=1)")
    assert "ETA" not in study.line() and study.line().endswith("finished (execution 20260101-120000)")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "ray_results").rename(elsewhere / "ray_results")
    monkeypatch.chdir(tmp_path / "elsewhere")
    [study] = local_status.local_studies("ray_results")
    assert study.line().startswith("[done-tiny] MLflow store mlflow.db not found"), study.line()


def test_status_shows_the_line_the_run_printed_last_without_importing_mlflow_or_ray(tmp_path):
    """The issue: 11.5 s for `study status`, and `best val_top1 –` where the run's line said 0.888.
    With a progress record the listing neither imports MLflow and Ray nor reads the runs."""
    spec = load_study(write_study(tmp_path, "cmp-record", **COMPARISON))
    directory = record_study(tmp_path, spec, [trial("attention", 0, val=0.5)], planned=8)
    best = ConfigMean("k", "lr=0.0031", 1, {"val_top1": 0.888})
    printed = Snapshot(
        "cmp-record", "tune arm 2/2 ssog", 1, 1, 0, 2, "val_top1", best, elapsed_s=300, eta_s=90.0
    )
    printed.whole = StudyCount(done=3, failed=0, planned=8, eta_s=600.0)
    progress_line.write(directory, printed)
    probe = (
        "import sys\n"
        "from vitscale.cli import main\n"
        "main(['study', 'status', '--storage', 'ray_results'])\n"
        "print(sorted(m for m in ('mlflow', 'ray', 'torch') if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    line, imported = proc.stdout.strip().splitlines()
    assert imported == "[]", imported
    assert re.match(
        r"\[cmp-record\] tune arm 2/2 ssog  1/2 done · 1 running · 0 failed · best val_top1 0\.888 \(n=1\) "
        r"lr=0\.0031 · updated \d+s ago · ETA (1m\d\d|\d\d)s — study 3/8 done · 0 failed · ETA (10m00|9m\d\d)s · running "
        r"\(execution 20260101-120000\)$",
        line,
    ), line


def test_watch_redraws_until_interrupted(capsys):
    frames = iter(["first", "second"])

    def render() -> str:
        frame = next(frames, None)
        if frame is None:
            raise KeyboardInterrupt
        return frame

    local_status.watch(render, every=0)
    out = capsys.readouterr().out
    assert out.count("\033[2J") == 2 and out.index("first") < out.index("second")
