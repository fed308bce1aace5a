"""`vitscale study validate|show` and `vitscale study schema`: exit codes and output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vitscale.cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main([*argv])
        raise SystemExit(0)
    out, err = capsys.readouterr()
    return info.value.code or 0, out, err


def test_validate_ok(capsys):
    files = [
        str(p)
        for p in sorted((ROOT / "studies").glob("*.yaml")) + sorted((ROOT / "search_spaces").glob("*.yaml"))
    ]
    code, out, err = run(capsys, "study", "validate", *files)
    assert code == 0 and err == ""
    assert out.count("OK ") == len(files)
    assert (
        "quickstart (train, grid): 18 trials = 6 grid points x 3 seeds\n" in out
    )  # one process: no resources
    assert (
        "paper-imagenet-vit-s (train, grid): 6 trials = 2 grid points x 3 seeds; "
        "each trial 8 Ray Train workers x (10 CPU, 1 GPU) = 80 CPU, 8 GPU\n"
    ) in out


def test_validate_bad_files_exit_2_with_every_error(capsys, write):
    good = write("good.yaml", "name: good\n")
    bad = write("bad.yaml", "name: bad\ntrial: {model: {heads: 5}}\nresources: {gpu: -1}\n")
    broken = write("broken.yaml", "name: [\n")
    code, out, err = run(capsys, "study", "validate", str(good), str(bad), str(broken))
    assert code == 2
    assert out == f"OK {good}: study good (train, grid): 1 trial = 1 grid point x 1 seed\n"
    lines = err.splitlines()
    assert lines[:2] == [
        f"error: {bad}: trial.model.heads: 5 does not divide width 64",
        f"error: {bad}: resources.gpu: Input should be greater than or equal to 0 (got -1)",
    ]
    assert lines[2].startswith(f"error: {broken}: line 2, column 1: invalid YAML")
    assert len(lines) == 3 and "Traceback" not in err


def test_validate_missing_file(capsys, tmp_path):
    code, _, err = run(capsys, "study", "validate", str(tmp_path / "nope.yaml"))
    assert code == 2 and err == f"error: {tmp_path / 'nope.yaml'}: file not found\n"


def test_show_yaml_and_json_with_overrides(capsys):
    path = str(ROOT / "studies/paper_cifar100_ode.yaml")
    code, out, _ = run(
        capsys, "study", "show", path, "--set", "search.seeds=[0]", "--set", "trial.train.epochs=2"
    )
    assert code == 0
    assert "paper_cifar100_ode.yaml <- " in out and "6 trials = 6 grid points x 1 seed" in out
    assert "regime: ode" in out and "epochs: 2" in out and "extends" not in out.split("\n", 2)[2]
    code, out, _ = run(capsys, "study", "show", path, "--json")
    report = json.loads(out)
    assert (
        code == 0 and report["trials"] == 18 and report["grid_points"] == 6 and report["seeds"] == [0, 1, 2]
    )
    assert report["spec"]["trial"]["model"]["regime"] == "ode" and len(report["files"]) == 2


def test_show_bad_override_exits_2(capsys):
    code, out, err = run(
        capsys, "study", "show", str(ROOT / "studies/quickstart.yaml"), "--set", "trial.train.epochs=0"
    )
    assert code == 2 and out == ""
    assert err.strip().endswith(
        "trial.train.epochs: Input should be greater than or equal to 1 (got 0) (set by --set)"
    )


def test_study_schema(capsys, tmp_path):
    code, out, _ = run(capsys, "study", "schema")
    assert code == 0 and json.loads(out)["title"] == "vitscale study"
    code, out, _ = run(capsys, "study", "schema", "--space", "--out", str(tmp_path / "s.json"))
    assert code == 0 and json.loads((tmp_path / "s.json").read_text())["title"] == "vitscale search space"


def test_spec_is_no_command_and_study_is_listed(capsys):
    code, _, _ = run(capsys, "spec", "schema")
    assert code == 2  # a usage error: the schema is `vitscale study schema`
    code, out, _ = run(capsys, "--help")
    assert code == 0 and " spec " not in out and " study " in out
