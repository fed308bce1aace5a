"""What only reads flags or study files starts without the heavy libraries (issue 30).

`vitscale --help`, every command's `--help`, `--version`, `study validate` of every shipped study
and `study show` run in one fresh interpreter; after each, the test reads which of torch,
torchdiffeq, scipy, pyarrow, Ray, MLflow, Optuna and matplotlib `sys.modules` holds. They cost
seconds of import (torch alone ~2 s of CPU), and a command that needs them imports them in its
body. No timing is asserted: a module that is loaded is the regression, however fast the machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "torchdiffeq", "scipy", "pyarrow", "ray", "mlflow", "optuna", "matplotlib")

# Runs each argv (then, with --every-help, every command's --help) through the real entry point,
# vitscale.cli.main, in one interpreter and prints per argv its exit code and the heavy modules
# loaded by then.
DRIVER = """
import json, sys
from vitscale.cli import main
from vitscale.cli.app import app
import typer.main

HEAVY = {heavy!r}
argvs = json.loads(sys.argv[1])

def commands(group, path=()):  # every command path, subcommands of groups included
    for name, command in sorted(getattr(group, "commands", {{}}).items()):
        yield [*path, name]
        yield from commands(command, (*path, name))

if sys.argv[2:] == ["--every-help"]:
    argvs += [[*path, "--help"] for path in commands(typer.main.get_command(app))]
out = []
for argv in argvs:
    try:
        main(argv)
        code = 0
    except SystemExit as exc:
        code = exc.code
    out.append({{"argv": argv, "code": code, "loaded": [m for m in HEAVY if m in sys.modules]}})
print("RESULT " + json.dumps(out))
"""


def _env() -> dict[str, str]:
    """This environment, with the checkout's platform/ first on the import path."""
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO / "platform"), os.environ.get("PYTHONPATH", "")]),
    }


def _run(argvs: list[list[str]], *more: str) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-c", DRIVER.format(heavy=HEAVY), json.dumps(argvs), *more],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=_env(),
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    line = next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line.removeprefix("RESULT "))


@pytest.mark.timeout(400)
def test_help_version_validate_and_show_import_no_heavy_library():
    studies = sorted(str(p.relative_to(REPO)) for p in (REPO / "studies").glob("*.yaml"))
    assert "studies/quickstart.yaml" in studies
    results = _run(
        [
            ["--help"],
            ["--version"],
            ["study", "validate", *studies],
            ["study", "show", "studies/quickstart.yaml"],
        ],
        "--every-help",
    )
    assert len(results) > 20  # the four above plus every command's --help
    for result in results:
        assert result["code"] == 0, f"vitscale {' '.join(result['argv'])} exited {result['code']}"
    first = next((r for r in results if r["loaded"]), None)
    assert first is None, f"`vitscale {' '.join(first['argv'])}` imported {', '.join(first['loaded'])}"


def test_the_check_sees_a_heavy_import():
    """The driver's inspection is real: a command that builds a model loads torch."""
    results = _run([["model", "info", "--width", "16", "--heads", "2", "--depth", "1", "-r", "16"]])
    assert results[0]["code"] == 0
    assert "torch" in results[0]["loaded"]


def test_a_study_driver_leaves_scikit_learn_to_pb2_studies():
    """Ray's PB2 module loads scikit-learn and scipy.stats: 0.8 s of every `study run` start on 2
    cores (5.25 -> 4.45 s to import the driver), for a scheduler few studies use."""
    probe = "import sys, vitscale.tune.run; print(sorted(m for m in ('sklearn', 'scipy.stats') if m in sys.modules))"
    proc = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, env=_env(), timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["[]"]
