"""The fast SSoG path: kernels cached only without autograd, and rebuilt when a parameter changes."""

from __future__ import annotations

import torch

from vitscale.models import ModelConfig, build
from vitscale.models.mixers.ssog import SSoG

CONFIG = dict(
    mixer="ssog", width=12, heads=3, depth=3, patch_size=2, image_size=8, num_classes=4, num_gaussians=3
)


def _mixers(model) -> list[SSoG]:
    return [m for m in model.modules() if isinstance(m, SSoG)]


def test_inference_reuses_kernels_and_rebuilds_them_after_a_parameter_change():
    model = build(ModelConfig(regime="looped", **CONFIG)).eval()
    x = torch.randn(2, 3, 8, 8)
    [mixer] = _mixers(model)
    with torch.inference_mode():
        first = model(x)
        cached = mixer._operand_cache[1][0]
        assert model(x).equal(first) and mixer._operand_cache[1][0] is cached  # reused, 3 calls each
    with torch.no_grad():
        mixer.log_sigma.add_(0.3)  # an in-place update (optimizer step, load_state_dict) bumps the version
    with torch.inference_mode():
        moved = model(x)
        assert mixer._operand_cache[1][0] is not cached
    mixer._operand_cache = None
    with torch.enable_grad():
        fresh = model(x)  # the grad path builds kernels every call and never caches
    assert mixer._operand_cache is None
    torch.testing.assert_close(moved, fresh.detach())
    assert not torch.allclose(moved, first)


def test_training_steps_see_their_own_kernels():
    model = build(ModelConfig(regime="ode", **{**CONFIG, "ode": {"solver": "rk4", "step_size": 1.0}}))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    sigmas = []
    for _ in range(2):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()  # twice over a fresh graph: no cached tensor from an old graph is reused
        sigmas.append(_mixers(model)[0].log_sigma.grad.clone())
        optimizer.step()
        optimizer.zero_grad()
    assert all(torch.isfinite(s).all() and s.abs().sum() > 0 for s in sigmas)


def test_bfloat16_autocast_runs_the_kernels_in_bfloat16():
    model = build(ModelConfig(regime="discrete", **CONFIG)).eval()
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 8, 8))
    assert torch.isfinite(out).all()
    assert _mixers(model)[0]._operand_cache[1][0].dtype == torch.bfloat16
