"""Provenance: commit, dirty flag and diff from git, carried through a job's environment."""

from __future__ import annotations

import subprocess

from vitscale.tracking import layout, provenance, store


def _repo(tmp_path):
    def git(*args):
        return subprocess.run(["git", *args], cwd=tmp_path, capture_output=True, text=True, check=True).stdout

    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    return git("rev-parse", "HEAD").strip()


def test_a_dirty_checkout_is_captured_and_travels_through_the_environment(tmp_path, monkeypatch):
    for name in (
        provenance.ENV_COMMIT,
        provenance.ENV_DIRTY,
        provenance.ENV_DIFF_FILE,
        provenance.ENV_SOURCE,
    ):
        monkeypatch.delenv(name, raising=False)
    head = _repo(tmp_path)
    clean = provenance.capture("s.yaml", cwd=tmp_path)
    assert (clean.commit, clean.dirty, clean.diff) == (head, False, "")
    (tmp_path / "a.py").write_text("x = 2  # uncommitted\n")
    dirty = provenance.capture("studies/s.yaml", cwd=tmp_path)
    assert dirty.commit == head and dirty.dirty is True and "+x = 2  # uncommitted" in dirty.diff
    tags = dirty.tags()
    assert tags[layout.SOURCE_COMMIT] == head and tags[layout.GIT_DIRTY] == "true"
    assert tags[layout.SOURCE_NAME] == "studies/s.yaml"

    # A submitted job: no .git; the commit in the environment, the diff in a file of its working_dir
    # (never in the environment, which the job API shows).
    env = dirty.to_env()
    assert not any("uncommitted" in value for value in env.values())
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    (job_dir / env[provenance.ENV_DIFF_FILE]).write_text(dirty.diff)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(job_dir)
    carried = provenance.capture("ignored", cwd=tmp_path / "nowhere")
    assert carried == dirty


def test_no_git_is_unknown_and_freeze_lists_this_environment(tmp_path, monkeypatch):
    monkeypatch.delenv(provenance.ENV_COMMIT, raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    captured = provenance.capture(cwd=tmp_path)
    assert captured.commit == "unknown" and captured.tags()[layout.GIT_DIRTY] == "unknown"
    frozen = provenance.freeze().splitlines()
    assert any(line.startswith("torch==") for line in frozen)
    assert any(line.lower().startswith("mlflow==") for line in frozen)


def test_experiments_are_marked_as_model_training(tmp_path):
    client = store.client_for(f"sqlite:///{tmp_path / 'm.db'}")
    old = client.create_experiment("made-elsewhere")
    assert store.ensure_experiment(client, "made-elsewhere") == old
    new = store.ensure_experiment(client, "new")
    for experiment_id in (old, new):
        tags = client.get_experiment(experiment_id).tags
        assert tags[layout.EXPERIMENT_KIND] == layout.EXPERIMENT_KIND_TRAINING
