"""Invalid model configs are rejected with a message that names the field."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from vitscale.models import ModelConfig
from vitscale.validation import error_lines

BAD = [
    ({"width": 64, "heads": 5}, "heads"),
    ({"image_size": 30, "patch_size": 4}, "image_size"),
    ({"ssog": {"num_gaussians": 0}}, "ssog.num_gaussians"),
    ({"num_gaussians": 4}, "num_gaussians"),
    ({"mixer": "conv"}, "mixer"),
    ({"regime": "recurrent"}, "regime"),
    ({"attention": {"backend": "flash"}}, "attention.backend"),
    ({"width": 0}, "width"),
    ({"mlp_ratio": 0}, "mlp_ratio"),
    ({"ode": {"solver": "leapfrog"}}, "ode.solver"),
    ({"ode": {"rtol": 0}}, "ode.rtol"),
    ({"ode": {"step_size": -1}}, "ode.step_size"),
    ({"ode": {"max_num_steps": 0}}, "ode.max_num_steps"),
    ({"widht": 64}, "widht"),
    # sizes beyond any ViT: one line, not an overflow traceback or a build that runs for minutes
    ({"mlp_ratio": 1e30}, "mlp_ratio"),
    ({"mlp_ratio": 0.001}, "mlp_ratio"),
    ({"depth": 100_000}, "depth"),
    ({"width": 1 << 20, "heads": 1}, "width"),
    ({"image_size": 1 << 20}, "image_size"),
    ({"ssog": {"num_gaussians": 10**8}}, "ssog.num_gaussians"),
    # a fixed-grid solve longer than max_num_steps: 4 million rk4 steps per forward ran for days
    ({"regime": "ode", "ode": {"solver": "rk4", "step_size": 1e-6}}, "ode.step_size"),
    (
        {"regime": "ode", "depth": 8, "ode": {"solver": "euler", "step_size": 0.5, "max_num_steps": 15}},
        "ode.step_size",
    ),
]


def test_a_fixed_grid_solve_of_exactly_max_num_steps_is_accepted() -> None:
    ModelConfig(regime="ode", depth=4, ode={"solver": "rk4", "step_size": 0.004})  # 1000 steps
    ModelConfig(regime="discrete", ode={"solver": "rk4", "step_size": 1e-6})  # not the active regime


@pytest.mark.parametrize(("values", "field"), BAD, ids=[f for _, f in BAD])
def test_invalid_config_names_the_field(values: dict, field: str) -> None:
    with pytest.raises(ValidationError) as info:
        ModelConfig.model_validate(values)
    lines = error_lines(info.value)
    assert len(lines) == 1 and lines[0].startswith(f"{field}: "), lines


def test_defaults_are_valid_and_the_grid_follows_image_and_patch() -> None:
    assert ModelConfig().grid == (8, 8)
    assert ModelConfig(image_size=224, patch_size=16).grid == (14, 14)


def test_head_dim_makes_heads_follow_width_across_a_sweep():
    """A size sweep over width with 16-dim heads: heads = width / 16 at every width, also when the
    width is set on a config dumped at another width (as a study's grid does)."""
    config = ModelConfig(width=96, head_dim=16)
    assert config.heads == 6
    dumped = config.model_dump()
    for width, heads in ((16, 1), (48, 3), (80, 5)):
        assert ModelConfig.model_validate({**dumped, "width": width}).heads == heads
    with pytest.raises(ValueError, match="head_dim: 16 does not divide width 40"):
        ModelConfig(width=40, head_dim=16)
    assert ModelConfig(width=64, heads=2).heads == 2  # without head_dim, heads as given
