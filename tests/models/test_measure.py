"""Parameter counts, FLOPs (and how they scale with tokens), the SSoG Lipschitz bound."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from vitscale.models import (
    MIXERS,
    REGIMES,
    build,
    count_params,
    flops_per_image,
    lipschitz_bound,
    mixing_flops,
)
from vitscale.models.mixers.ssog import SSoG

EXPONENT = {"attention": 2.0, "ssog": 1.5}  # mixing FLOPs ~ tokens^exponent


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_ssog_has_fewer_parameters_than_attention(tiny, regime: str) -> None:
    attention = count_params(build(tiny(mixer="attention", regime=regime, width=32)))
    ssog = count_params(build(tiny(mixer="ssog", regime=regime, width=32)))
    assert ssog < attention


def test_shared_blocks_are_counted_once(tiny) -> None:
    plain = {"layer_scale": 0.0, "attention": {"qk_norm": False}}  # the looped default adds stabilisers
    discrete, looped = (count_params(build(tiny(regime=r, depth=3, **plain))) for r in ("discrete", "looped"))
    block = count_params(build(tiny(depth=1)).blocks.blocks[0])
    assert discrete - looped == 2 * block


def test_attention_over_ssog_flop_ratio_grows_with_resolution(tiny) -> None:
    ratios = [
        flops_per_image(tiny(mixer="attention", image_size=r))
        / flops_per_image(tiny(mixer="ssog", image_size=r))
        for r in (8, 16, 32, 64)
    ]
    assert all(b > a for a, b in zip(ratios, ratios[1:], strict=False)), ratios
    assert ratios[-1] > 3


@pytest.mark.parametrize(("mixer", "exponent"), list(EXPONENT.items()))
def test_mixing_flops_follow_the_expected_power_law(tiny, mixer: str, exponent: float) -> None:
    module = MIXERS[mixer](tiny(mixer=mixer))
    sides = [4, 8, 16, 32]
    flops = [mixing_flops(module, (s, s)) for s in sides]
    slope = np.polyfit(np.log([s * s for s in sides]), np.log(flops), 1)[0]
    assert slope == pytest.approx(exponent, abs=0.05)


def test_ssog_mixing_flops_match_the_formula(tiny) -> None:
    config = tiny(mixer="ssog", width=24, heads=3, ssog={"num_gaussians": 3})
    h, w = 6, 10
    assert mixing_flops(SSoG(config), (h, w)) == 2 * 3 * (h * w) * (h + w) * 24


def test_cpu_sdpa_is_counted_like_the_explicit_attention(tiny) -> None:
    sdpa, math_ = (flops_per_image(tiny(attention={"backend": b}, image_size=32)) for b in ("sdpa", "math"))
    assert sdpa == math_ > 0


@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_flops_of_a_config_equal_flops_of_the_built_model(tiny, mixer: str) -> None:
    config = tiny(mixer=mixer)
    assert flops_per_image(config, 16) == flops_per_image(build(config), 16)


def test_ode_flops_count_every_function_evaluation(tiny) -> None:
    one_block = flops_per_image(tiny(regime="looped", depth=2)) - flops_per_image(
        tiny(regime="looped", depth=1)
    )
    euler = flops_per_image(tiny(regime="ode", ode={"solver": "euler"}))  # 2 evaluations
    fine = flops_per_image(tiny(regime="ode", ode={"solver": "euler", "step_size": 0.5}))  # 4
    assert euler == flops_per_image(tiny(regime="looped"))
    assert fine - euler == 2 * one_block > 0


def power_iteration(mixer: SSoG, grid_hw: tuple[int, int], prefix: int, iters: int = 100) -> float:
    """||J||_2 of the (affine) mixer by power iteration on J^T J, via autograd."""
    tokens = prefix + grid_hw[0] * grid_hw[1]
    zero = torch.zeros(1, tokens, mixer.v.in_features, dtype=torch.float64)
    base = mixer(zero, grid_hw).detach()
    v = torch.randn_like(zero)
    for _ in range(iters):
        v = (v / v.norm()).requires_grad_(True)
        jv = mixer(v, grid_hw) - base
        (jtjv,) = torch.autograd.grad(jv, v, jv)
        estimate = jv.norm().item()
        v = jtjv.detach()
    return estimate


@pytest.mark.parametrize("k", [1, 3])
@pytest.mark.parametrize("grid_hw", [(4, 4), (3, 6)])
@pytest.mark.parametrize("prefix", [0, 1])
@pytest.mark.parametrize("seed", [0, 1])
def test_power_iteration_never_exceeds_the_lipschitz_bound(tiny, k, grid_hw, prefix, seed) -> None:
    torch.manual_seed(seed)
    mixer = SSoG(tiny(mixer="ssog", width=12, heads=3, ssog={"num_gaussians": k})).double()
    with torch.no_grad():  # a trained-looking operator: big weights, mixed-sign mixtures, offsets
        for p in (mixer.v.weight, mixer.out.weight):
            p.normal_(0, 0.5)
        mixer.mix.normal_()
        mixer.offset.normal_(0, 0.2)
        mixer.log_sigma.add_(torch.randn_like(mixer.log_sigma))
    estimate = power_iteration(mixer, grid_hw, prefix)
    assert estimate <= lipschitz_bound(mixer, grid_hw, prefix_tokens=prefix) * (1 + 1e-9)


def test_lipschitz_bound_is_tight_for_a_single_separable_gaussian(tiny) -> None:
    mixer = SSoG(tiny(mixer="ssog", width=4, heads=1, ssog={"num_gaussians": 1})).double()
    with torch.no_grad():
        mixer.v.weight.copy_(torch.eye(4))
        mixer.out.weight.copy_(torch.eye(4))
    bound = lipschitz_bound(mixer, (5, 4), prefix_tokens=0)
    assert power_iteration(mixer, (5, 4), 0) == pytest.approx(bound, rel=1e-6)


def test_lipschitz_bound_of_a_model_and_of_attention(tiny) -> None:
    model = build(tiny(mixer="ssog"))
    per_mixer = [lipschitz_bound(b.mixer, (4, 4), 1) for b in model.blocks.blocks]
    assert lipschitz_bound(model) == pytest.approx(max(per_mixer))
    assert math.isfinite(lipschitz_bound(model, (16, 16)))
    with pytest.raises(TypeError, match="no mixer with a Lipschitz bound"):
        lipschitz_bound(build(tiny(mixer="attention")))
