"""The fast SSoG path: kernels cached only without autograd, within one model forward, never stale."""

from __future__ import annotations

import torch

from vitscale.models import ModelConfig, build
from vitscale.models.mixers.ssog import SSoG

CONFIG = dict(
    mixer="ssog",
    width=12,
    heads=3,
    depth=3,
    patch_size=2,
    image_size=8,
    num_classes=4,
    ssog={"num_gaussians": 3},
)


def _mixers(model) -> list[SSoG]:
    return [m for m in model.modules() if isinstance(m, SSoG)]


def _count_kernel_builds(mixer: SSoG) -> list[int]:
    calls = [0]
    original = mixer.operands

    def counting(grid_hw):
        calls[0] += 1
        return original(grid_hw)

    mixer.operands = counting  # instance attribute shadows the method
    return calls


def test_inference_builds_kernels_once_per_forward_and_keeps_none_after_it():
    model = build(ModelConfig(regime="looped", **CONFIG)).eval()
    x = torch.randn(2, 3, 8, 8)
    [mixer] = _mixers(model)
    calls = _count_kernel_builds(mixer)
    with torch.inference_mode():
        first = model(x)
        assert calls[0] == 1  # three applications of the shared block, one kernel build
        assert mixer._operand_cache is None  # nothing survives the forward
        assert model(x).equal(first) and calls[0] == 2
    with torch.enable_grad():
        fresh = model(x)  # the grad path builds kernels every call and never caches
    assert calls[0] == 2 + 3
    torch.testing.assert_close(first, fresh.detach())
    mixer(torch.randn(2, 17, 12), (4, 4))  # a mixer used alone never caches
    assert mixer._operand_cache is None


def _eval_after(model: torch.nn.Module, update) -> tuple[torch.Tensor, torch.Tensor]:
    """(cached eval output after `update`, the same with a freshly built copy): must be equal."""
    x = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        model(x)  # a forward before the update (the old cache keyed on versions survived it)
    update()
    with torch.inference_mode():
        cached = model(x)
    fresh = build(model.config).eval()
    fresh.load_state_dict(model.state_dict())
    with torch.inference_mode():
        return cached, fresh(x)


def test_kernels_are_never_stale_after_a_fused_adamw_step():
    model = build(ModelConfig(regime="ode", **{**CONFIG, "ode": {"solver": "rk4", "step_size": 1.0}}))
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.3, fused=True)

    def step():
        model.train()
        loss = torch.nn.functional.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 3]))
        loss.backward()
        optimizer.step()  # fused: writes parameters without bumping their version counters
        model.eval()

    model.eval()
    cached, fresh = _eval_after(model, step)
    torch.testing.assert_close(cached, fresh, rtol=0, atol=0)


def test_kernels_are_never_stale_after_an_in_place_ema_update():
    model = build(ModelConfig(regime="looped", **CONFIG)).eval()
    target = {n: p.detach() + 0.5 for n, p in model.named_parameters()}

    def ema():
        for name, p in model.named_parameters():
            p.data.mul_(0.5).add_(target[name], alpha=0.5)  # .data: no version bump on the parameter

    cached, fresh = _eval_after(model, ema)
    torch.testing.assert_close(cached, fresh, rtol=0, atol=0)


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
    dtypes = []
    for mixer in _mixers(model):
        original = mixer._cached_operands
        mixer._cached_operands = lambda grid, dtype, f=original: dtypes.append(dtype) or f(grid, dtype)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 8, 8))
    assert torch.isfinite(out).all()
    assert dtypes and set(dtypes) == {torch.bfloat16}
