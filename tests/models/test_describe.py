"""`describe_model` (what `vitscale model info` prints) counts on the meta device and builds real
weights only where something reads them (issue 30); every figure must equal what a real forward of
a seed-0 model measures with FlopCounterMode, for every registered mixer and regime."""

from __future__ import annotations

import pytest
import torch

from vitscale.models import (
    MIXERS,
    REGIMES,
    build,
    count_params,
    describe_model,
    flops_per_image,
    lipschitz_bound,
    mixing_flops,
)
from vitscale.models.measure import has_lipschitz_bound, needs_values


def _measured(config):
    """The figures as a real forward of the real seed-0 model gives them (the slow way)."""
    torch.manual_seed(0)
    model = build(config)
    mixer = next(m for m in model.modules() if isinstance(m, MIXERS[config.mixer]))
    assert next(model.parameters()).device.type == "cpu"
    return model, {
        "params": count_params(model),
        "flops_per_image": flops_per_image(model),  # FlopCounterMode on a real forward of one image
        "mixing_flops": mixing_flops(mixer, config.grid),
        "lipschitz_bound": lipschitz_bound(model) if has_lipschitz_bound(model) else None,
        "no_weight_decay": sorted(model.no_weight_decay()),
        "lr_scale": dict(sorted(model.lr_scales().items())),
    }


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_the_fast_description_equals_a_real_forward(tiny, mixer: str, regime: str) -> None:
    config = tiny(mixer=mixer, regime=regime)
    fast, fast_nfe = describe_model(config)
    model, measured = _measured(config)
    assert fast["flops_per_image"] > 0 and fast["params"] > 0
    for key in ("params", "flops_per_image", "mixing_flops", "no_weight_decay", "lr_scale"):
        assert fast[key] == measured[key], key
    if measured["lipschitz_bound"] is None:
        assert fast["lipschitz_bound"] is None
    else:  # the same SVDs; LAPACK on another thread count may round the last bit differently
        assert fast["lipschitz_bound"] == pytest.approx(measured["lipschitz_bound"], rel=1e-12)
    assert fast_nfe == model.last_nfe
    assert fast["tokens"] == config.grid[0] * config.grid[1]


def test_only_weight_reading_descriptions_build_real_weights(tiny) -> None:
    """Attention in the discrete regime reads no weight (meta device only); SSoG's bound and an
    adaptive ODE's step count do."""
    assert not needs_values(tiny(mixer="attention", regime="discrete"))
    assert not needs_values(tiny(mixer="attention", regime="looped"))
    assert needs_values(tiny(mixer="ssog", regime="discrete"))
    assert needs_values(tiny(mixer="attention", regime="ode"))


def test_describing_restores_the_thread_count(tiny) -> None:
    torch.set_num_threads(2)
    describe_model(tiny(mixer="ssog"))  # runs on one thread
    assert torch.get_num_threads() == 2
