"""Every mixer and regime under bf16 autocast on the CPU (`train.precision: bfloat16`): what runs in
bf16, what must stay float32 (parameters, gradients, the residual stream, an ODE solver's state)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from vitscale.models import MIXERS, REGIMES, build
from vitscale.models.regimes.ode import NeuralOde
from vitscale.precision import autocast


def _record_field(model) -> list[tuple[torch.dtype, torch.dtype]]:
    """(state dtype, field value dtype) of every vector-field evaluation of the model's ODE."""
    seen: list[tuple[torch.dtype, torch.dtype]] = []
    block = model.blocks.block
    residual = block.residual

    def recording(y, grid_hw):
        out = residual(y, grid_hw)
        seen.append((y.dtype, out.dtype))
        return out

    block.residual = recording
    return seen


def _linear_outputs(model) -> dict[str, set[torch.dtype]]:
    """The dtypes Linear layers returned, inside an ODE's field and elsewhere, filled as the model runs."""
    inside = {id(m) for ode in model.modules() if isinstance(ode, NeuralOde) for m in ode.modules()}
    seen: dict[str, set[torch.dtype]] = {"field": set(), "other": set()}
    for module in model.modules():
        if isinstance(module, nn.Linear):
            where = "field" if id(module) in inside else "other"
            module.register_forward_hook(lambda _m, _i, out, w=where: seen[w].add(out.dtype))
    return seen


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_every_model_trains_under_cpu_bf16_autocast(tiny, mixer: str, regime: str) -> None:
    model = build(tiny(mixer=mixer, regime=regime, ode={"solver": "rk4"}))
    seen = _linear_outputs(model)
    with autocast("bfloat16", "cpu"):
        logits = model(torch.randn(4, 3, 8, 8))
    logits.float().logsumexp(-1).mean().backward()
    assert logits.dtype == torch.bfloat16 and torch.isfinite(logits.float()).all()
    assert seen["other"] == {torch.bfloat16}  # the matmuls ran in bf16 (AMX), not ignored on CPU
    for name, p in model.named_parameters():
        assert p.dtype == torch.float32 and p.grad is not None and p.grad.dtype == torch.float32, name


@pytest.mark.parametrize("mixer", ["attention", "ssog"])
def test_adaptive_ode_state_and_field_stay_float32_under_autocast(tiny, mixer: str) -> None:
    """dopri5's error estimate reads the field: it runs in float32 (model.ode.field_fp32), and the
    state torchdiffeq integrates is float32 throughout, whatever autocast the caller opened."""
    model = build(tiny(mixer=mixer, regime="ode", ode={"solver": "dopri5"}))
    field = _record_field(model)
    linears = _linear_outputs(model)
    images = torch.randn(2, 3, 8, 8)
    with autocast("bfloat16", "cpu"):
        tokens, grid = model.embed(images)
        states = model.blocks.solve(tokens, grid, inner=[0.5, 1.0])
        model(images)
    assert tokens.dtype == torch.float32  # the residual stream enters the solver in float32
    assert states.dtype == torch.float32 and torch.isfinite(states).all()
    assert field and set(field) == {(torch.float32, torch.float32)}
    assert linears["field"] == {torch.float32} and linears["other"] == {torch.bfloat16}


def test_fixed_grid_ode_field_runs_in_bf16_but_the_state_stays_float32(tiny) -> None:
    model = build(tiny(mixer="ssog", regime="ode", ode={"solver": "rk4", "step_size": 0.5}))
    field = _record_field(model)
    linears = _linear_outputs(model)
    with autocast("bfloat16", "cpu"):
        model(torch.randn(2, 3, 8, 8))
    assert len(field) == model.last_nfe == 16  # 4 stages x 4 steps over [0, depth=2]
    assert {state for state, _ in field} == {torch.float32}
    assert linears["field"] == {torch.bfloat16}  # the speed: a fixed grid has no error estimate


def test_ssog_in_bf16_is_close_to_float32_and_keeps_bf16_operands(tiny) -> None:
    """SSoG's Gaussian kernels are built in float32 and cast to the activations' dtype: under
    autocast both GEMMs run in bf16 and the mixer stays within bf16 rounding of float32."""
    model = build(tiny(mixer="ssog", regime="discrete")).eval()
    mixer = model.blocks.blocks[0].mixer
    x = torch.randn(2, 1 + 16, 16)
    with torch.inference_mode():
        exact = mixer(x, (4, 4))
        with autocast("bfloat16", "cpu"):
            low = mixer(x, (4, 4))
            rows, cols = mixer.operands_for((4, 4), torch.bfloat16)
    assert low.dtype == rows.dtype == cols.dtype == torch.bfloat16
    torch.testing.assert_close(low.float(), exact, atol=3e-2, rtol=3e-2)
    assert not torch.equal(low.float(), exact)  # it did run in bf16


def test_attention_auto_backend_is_sdpa_except_under_cpu_bf16_autocast(tiny, monkeypatch) -> None:
    """`model.attention.backend: auto`: the fused kernel, except under bf16 autocast on the CPU
    (where torch's fused kernel is the slow one); the same function either way."""
    model = build(tiny(mixer="attention"))
    fused = []
    original = torch.nn.functional.scaled_dot_product_attention
    monkeypatch.setattr(
        torch.nn.functional,
        "scaled_dot_product_attention",
        lambda *a, **k: fused.append(1) or original(*a, **k),
    )
    x = torch.randn(2, 3, 8, 8)
    plain = model(x)
    assert len(fused) == model.config.depth
    fused.clear()
    with autocast("bfloat16", "cpu"):
        low = model(x)
    assert not fused
    assert torch.allclose(low.float(), plain, atol=0.05)
