"""A full disk is named as such and leaves a resumable execution: on a small tmpfs (skipped where
mounting one is not permitted), a study whose disk fills mid-run ends in one line naming the disk
and the fix (exit 2, no traceback, no retry storm), and `study resume` finishes it once space is
freed; a disk full before the study starts is one line too; the MLflow write queue never leaves a
torn journal line and tells the driver."""

from __future__ import annotations

import contextlib
import subprocess
import time
from pathlib import Path

import pytest
from study_helpers import child_runs, parent_runs, start_vitscale, vitscale, wait_or_kill, write_study

from vitscale import storage_errors
from vitscale.tracking.queue import WriteQueue

SIZE = "48m"


@pytest.fixture
def small_disk(tmp_path):
    """A tmpfs of SIZE at tmp_path/disk: the test's own disk, filled at will."""
    mount = tmp_path / "disk"
    mount.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={SIZE}", "tmpfs", str(mount)], capture_output=True
    )
    if proc.returncode != 0:
        pytest.skip(
            f"cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN): {proc.stderr.decode().strip()}"
        )
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write zeros until the disk is full; the filler file, to delete when space is to be freed."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as handle, contextlib.suppress(OSError):
        while True:
            handle.write(b"\0" * 2**20)
    with filler.open("ab", buffering=0) as handle:  # the last pages, byte by byte
        with contextlib.suppress(OSError):
            while True:
                handle.write(b"\0" * 4096)
    return filler


def test_a_full_journal_disk_cuts_the_line_back_and_tells_the_driver(small_disk):
    told = []
    queue = WriteQueue(small_disk / "queue", f"sqlite:///{small_disk / 'mlflow.db'}")
    queue.submit("log_batch", "run", tags=[["a", "b"]])
    queue.wait_sent(timeout=120)
    filler = fill(small_disk)
    with storage_errors.listen(told.append):
        queue.submit("log_batch", "run", tags=[["c", "d" * 100_000]])  # does not raise
    assert told and told[0].kind == storage_errors.FULL and not told[0].transient
    assert str(small_disk / "queue" / "journal.jsonl") in told[0].line()
    filler.unlink()
    journal = (small_disk / "queue" / "journal.jsonl").read_bytes()
    assert journal.endswith(b"\n") and journal.count(b"\n") == 1  # the failed line cut back whole
    queue.close(timeout=60)


@pytest.mark.slow  # the store's first write (the experiment) comes once Ray is up
def test_a_disk_full_before_the_study_starts_is_one_line(tmp_path, small_disk):
    study = write_study(tmp_path, "full-at-start", search={"algorithm": "grid"})
    fill(small_disk)
    uri = f"sqlite:///{small_disk / 'mlflow.db'}"
    proc = vitscale("study", "run", str(study), "--tracking-uri", uri, "--quiet", cwd=tmp_path, check=False)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.strip() and "INFO" not in line]
    assert line.startswith(f"error: {small_disk / 'mlflow.db'}: disk full"), line


def _epochs(results: Path) -> int:
    return sum(f.read_text().count("\n") for f in results.glob("*/*/*/result.json"))


@pytest.mark.slow
def test_a_disk_filling_mid_study_stops_it_in_one_line_and_resume_finishes_it(tmp_path, small_disk):
    study = write_study(
        tmp_path,
        "full-tiny",
        space={"model.mixer": {"grid": ["attention", "ssog"]}},
        search={"algorithm": "grid", "max_concurrent_trials": 1},
    )
    uri, results = f"sqlite:///{small_disk / 'mlflow.db'}", small_disk / "results"
    command = ["study", "run", str(study), "--tracking-uri", uri, "--storage", str(results)]
    command += ["--num-cpus", "1", "--quiet", "--set", "trial.train.epochs=6"]
    with open(tmp_path / "driver.log", "w") as log:
        driver = start_vitscale(*command, cwd=tmp_path, log=log)
        deadline = time.time() + 300
        while _epochs(results) < 3:  # a few epochs recorded: the state a resume continues from
            assert driver.poll() is None and time.time() < deadline, (tmp_path / "driver.log").read_text()
            time.sleep(0.05)
        filler = fill(small_disk)
        code = wait_or_kill(driver)
    output = (tmp_path / "driver.log").read_text()
    assert code == 2, output
    assert "Traceback" not in output, output
    last = output.strip().splitlines()[-1]
    assert last.startswith("error: ") and "disk full" in last and "vitscale study resume" in last, output
    assert output.count("disk full") <= 4, output  # named, not retried in a storm

    filler.unlink()
    folder = next(p for p in (results / "full-tiny").iterdir() if p.is_dir())
    vitscale("study", "resume", str(folder), "--num-cpus", "1", "--quiet", cwd=tmp_path)
    runs = child_runs(uri, "full-tiny")
    assert sorted(r.data.tags["vitscale.status"] for r in runs) == ["FINISHED", "FINISHED"]
    (parent,) = parent_runs(uri, "full-tiny")
    assert parent.info.status == "FINISHED"
    partial = [
        p for p in folder.rglob("*") if p.name.endswith(".tmp") or p.name.startswith(".vitscale-partial-")
    ]
    assert not partial, "a temporary file of a failed write was left behind"
