"""`vitscale model info`: table and JSON output, one-line errors with exit code 2."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from vitscale.cli import main
from vitscale.cli.model_cmd import model_config, model_flags, model_options

SMALL = ["--width", "16", "--heads", "2", "--depth", "2", "--patch-size", "4", "--num-classes", "10"]


def run(capsys, *args: str) -> tuple[int, str, str]:
    try:
        main(["model", "info", *args])
        code = 0
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("mixer", ["attention", "ssog"])
def test_json_lists_one_object_per_resolution_with_exactly_the_keys(capsys, mixer: str) -> None:
    code, out, _ = run(capsys, "--mixer", mixer, *SMALL, "-r", "32", "--resolution", "64", "--json")
    assert code == 0
    rows = json.loads(out)
    assert [set(r) for r in rows] == [
        {
            "tokens",
            "params",
            "flops_per_image",
            "mixing_flops",
            "lipschitz_bound",
            "no_weight_decay",
            "lr_scale",
            "config",
        }
    ] * 2
    assert [r["tokens"] for r in rows] == [64, 256]
    assert [r["config"]["image_size"] for r in rows] == [32, 64]
    assert rows[1]["flops_per_image"] > rows[0]["flops_per_image"] > 0
    assert all((r["lipschitz_bound"] is None) == (mixer == "attention") for r in rows)


def test_table_output(capsys) -> None:
    code, out, _ = run(capsys, "--mixer", "ssog", "--regime", "ode", *SMALL, "-r", "32")
    assert code == 0 and "lipschitz_bound" in out and "NFE" in out


def test_invalid_combination_is_one_line_exit_2(capsys) -> None:
    code, out, err = run(capsys, "--width", "64", "--heads", "5")
    assert code == 2 and err.strip().splitlines() == ["error: heads: 5 does not divide width 64"]


def test_resolution_not_divisible_by_patch_is_one_line_exit_2(capsys) -> None:
    code, _, err = run(capsys, *SMALL, "-r", "30")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "image_size" in err


@pytest.mark.parametrize("args", [["--width", "abc"], ["--bogus"]], ids=["bad-value", "unknown-flag"])
def test_bad_flag_is_one_line_exit_2(capsys, args: list[str]) -> None:
    code, _, err = run(capsys, *args)
    assert code == 2 and len(err.strip().splitlines()) == 1, err


def test_model_options_are_reusable_by_other_commands() -> None:
    app = typer.Typer()
    seen = {}

    @app.command()
    @model_options
    def train(model_overrides: dict, epochs: int = 1) -> None:
        seen.update(model_overrides, epochs=epochs)

    args = ["--mixer", "ssog", "--ode-rtol", "1e-5", "--no-ssog-offsets", "--epochs", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert seen == {"mixer": "ssog", "ssog": {"offsets": False}, "ode": {"rtol": 1e-5}, "epochs": 3}
    config = model_config({"ode": {"rtol": 1e-5}}, base={"width": 32, "heads": 4, "ode": {"solver": "bosh3"}})
    assert (config.width, config.ode.solver, config.ode.rtol) == (32, "bosh3", 1e-5)
    assert len({f.param for f in model_flags()}) == len(model_flags())


@pytest.mark.parametrize(
    ("mixer", "own"),
    [("attention", {"attention": {"backend": "auto", "qk_norm": False}}), ("ssog", None)],
)
def test_looped_json_shows_each_arms_resolved_stabilisers_and_kernel_lr_scale(capsys, mixer, own) -> None:
    """No regime default switches on a stabiliser for one mixer: both looped arms get the same
    LayerScale, attention no QK-norm unless asked, SSoG its own kernel-lr scale; all resolved."""
    code, out, _ = run(capsys, "--mixer", mixer, "--regime", "looped", *SMALL, "--json")
    assert code == 0
    (row,) = json.loads(out)
    config = row["config"]
    assert config["layer_scale"] == 0.1 and isinstance(config["pos_embed"], bool)
    if own is not None:
        assert {k: config[k] for k in own} == own and row["lr_scale"] == {}
    else:
        scale = config["ssog"]["kernel_lr_scale"]
        assert scale == 10.0 and set(row["lr_scale"].values()) == {scale}
        assert {n.rsplit(".", 1)[1] for n in row["lr_scale"]} == {"log_sigma", "offset"}
