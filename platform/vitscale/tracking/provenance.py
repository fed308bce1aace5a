"""Where a study's code and environment came from, captured where they are known and carried along.

On the machine that launches a study (a laptop, or the head running `study run`), `capture()` reads
git: the commit, whether tracked files differ from it (dirty) and that diff, plus the installed
distributions (a `pip freeze`). A submitted job has no `.git` (it is excluded from the job's
working_dir and from the image), so `study submit` captures them on the client and passes the commit
and dirty flag in the job's environment (`to_env`) and the diff as a file in the job's working_dir
(DIFF_FILE, named by VITSCALE_GIT_DIFF_FILE: the job API shows a job's environment to anyone who can
list jobs, so the diff never goes there), and the Docker image takes the commit as a build arg
(VITSCALE_GIT_COMMIT). `capture()` prefers that environment over git, so the job's runs name the
code that was submitted, not `unknown`.

MLflow sees them as its own standard tags (`mlflow.source.git.commit`, `mlflow.source.name`,
`mlflow.source.type`, the Source column of the UI) plus `vitscale.git.dirty`, on the parent run
and on every child run; the parent run holds `requirements.txt` and, when dirty, `git.diff`.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from importlib.metadata import distributions
from pathlib import Path

from vitscale.tracking import layout

ENV_COMMIT = "VITSCALE_GIT_COMMIT"
ENV_DIRTY = "VITSCALE_GIT_DIRTY"
ENV_DIFF_FILE = "VITSCALE_GIT_DIFF_FILE"  # the diff's file, relative to the job's working_dir
DIFF_FILE = ".vitscale-git.diff"  # what `study submit` writes into the upload
ENV_SOURCE = "VITSCALE_SOURCE_NAME"
DIFF_ARTIFACT = "git.diff"
REQUIREMENTS_ARTIFACT = "requirements.txt"
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Provenance:
    commit: str
    dirty: bool | None  # None: unknown (no git and nothing passed in)
    diff: str
    source: str

    def tags(self) -> dict[str, str]:
        """The tags every run of the study carries."""
        return {
            layout.GIT_COMMIT: self.commit,
            layout.GIT_DIRTY: UNKNOWN if self.dirty is None else str(self.dirty).lower(),
            layout.SOURCE_COMMIT: self.commit,
            layout.SOURCE_NAME: self.source,
            layout.SOURCE_TYPE: "LOCAL",
        }

    def to_env(self) -> dict[str, str]:
        """Environment variables that carry this capture to a job without `.git`; the diff itself
        goes into the job's working_dir as DIFF_FILE (see the module docstring)."""
        env = {ENV_COMMIT: self.commit, ENV_SOURCE: self.source}
        if self.dirty is not None:
            env[ENV_DIRTY] = str(self.dirty).lower()
        if self.diff.strip():
            env[ENV_DIFF_FILE] = DIFF_FILE
        return env


def _git(args: list[str], cwd: Path | None) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout


def capture(source: str = "", cwd: str | Path | None = None) -> Provenance:
    """From the environment a submitter set, else from git in `cwd` (default: the checkout this
    vitscale is imported from, i.e. the code that runs), else 'unknown'."""
    env = os.environ
    source = env.get(ENV_SOURCE) or source
    if env.get(ENV_COMMIT, UNKNOWN) != UNKNOWN:
        dirty = env.get(ENV_DIRTY)
        diff_file = env.get(ENV_DIFF_FILE)
        try:
            diff = Path(diff_file).read_text() if diff_file else ""
        except (OSError, UnicodeDecodeError):
            diff = f"# the submitted diff ({diff_file}) could not be read; see {env[ENV_COMMIT]}\n"
        return Provenance(
            commit=env[ENV_COMMIT],
            dirty=None if dirty is None else dirty == "true",
            diff=diff,
            source=source,
        )
    cwd = Path(cwd) if cwd else Path(__file__).resolve().parent
    commit = (_git(["rev-parse", "HEAD"], cwd) or "").strip()
    if not commit:
        return Provenance(UNKNOWN, None, "", source)
    diff = _git(["diff", "HEAD", "--no-color", "--no-ext-diff"], cwd) or ""
    return Provenance(commit, bool(diff.strip()), diff, source)


def freeze() -> str:
    """`pip freeze` of this interpreter, from its installed distributions (works without pip)."""
    lines = set()
    for dist in distributions():
        name = dist.metadata["Name"]
        if name:
            lines.add(f"{name}=={dist.version}")
    return "\n".join(sorted(lines, key=str.lower)) + "\n"


def log_to_parent(client, run_id: str, provenance: Provenance) -> None:
    """requirements.txt (always) and git.diff (when dirty) as artifacts of the parent run."""
    client.log_text(run_id, freeze(), REQUIREMENTS_ARTIFACT)
    if provenance.diff.strip():
        client.log_text(run_id, provenance.diff, DIFF_ARTIFACT)
