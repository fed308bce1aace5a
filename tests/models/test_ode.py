"""The ODE regime: NFE versus tolerance, euler == looped, solver failures are typed and fast."""

from __future__ import annotations

import pytest
import torch

from vitscale.errors import TrialDiverged
from vitscale.models import MIXERS, REGIMES, SolverError, build


@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_tighter_tolerance_needs_more_function_evaluations(tiny, mixer: str) -> None:
    loose = build(tiny(mixer=mixer, regime="ode", ode={"rtol": 1e-2, "atol": 1e-2}))
    tight = build(tiny(mixer=mixer, regime="ode", ode={"rtol": 1e-6, "atol": 1e-6}))
    tight.load_state_dict(loose.state_dict())
    images = torch.randn(4, 3, 8, 8)
    with torch.no_grad():
        out_loose, out_tight = loose(images), tight(images)
    assert tight.last_nfe > loose.last_nfe > 0
    # the same model, to within what a 1e-2 tolerance per step allows over the whole solve
    torch.testing.assert_close(out_loose, out_tight, atol=5e-2, rtol=5e-2)


@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_euler_step_one_over_depth_is_the_looped_model(tiny, mixer: str) -> None:
    looped = build(tiny(mixer=mixer, regime="looped", depth=3))
    ode = build(tiny(mixer=mixer, regime="ode", depth=3, ode={"solver": "euler", "step_size": 1.0}))
    assert looped.state_dict().keys() == ode.state_dict().keys()  # same parameters, same names
    ode.load_state_dict(looped.state_dict())
    images = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(ode(images), looped(images), atol=1e-6, rtol=1e-6)
    assert ode.last_nfe == 3 and looped.last_nfe is None


def test_fixed_grid_step_size_sets_the_number_of_evaluations(tiny) -> None:
    model = build(tiny(regime="ode", depth=2, ode={"solver": "rk4", "step_size": 0.5}))
    model(torch.randn(1, 3, 8, 8))
    assert model.last_nfe == 4 * 4  # four steps of four stages


def test_forced_step_underflow_raises_solver_error_within_a_few_steps(tiny) -> None:
    ode = {"solver": "dopri5", "rtol": 1e-20, "atol": 1e-20, "max_num_steps": 10**6}
    model = build(tiny(mixer="ssog", regime="ode", ode=ode))
    with pytest.raises(SolverError, match="underflow in dt") as info:
        model(torch.randn(2, 3, 8, 8))
    # Reported at the first step below eps·t_end, not after creeping on for max_num_steps (each
    # dopri5 step is 6 evaluations): counted in field evaluations, not seconds.
    assert model.nfe_count < 1000
    for setting in ("solver=dopri5", "rtol=1e-20", "atol=1e-20", "max_num_steps=1000000", "t_end=2"):
        assert setting in str(info.value)


def test_max_num_steps_exceeded_raises_solver_error(tiny) -> None:
    model = build(tiny(regime="ode", ode={"rtol": 1e-9, "atol": 1e-9, "max_num_steps": 2}))
    with pytest.raises(SolverError, match="max_num_steps exceeded.*max_num_steps=2"):
        model(torch.randn(2, 3, 8, 8))


def test_non_finite_state_is_a_diverged_trial(tiny) -> None:
    model = build(tiny(regime="ode"))
    with pytest.raises(TrialDiverged, match="non-finite"):
        model(torch.full((1, 3, 8, 8), float("nan")))


def test_adjoint_gradients_match_backprop_through_the_solver(tiny) -> None:
    """The adjoint solves the continuous adjoint ODE: equal to backprop up to discretisation."""
    ode = {"solver": "rk4", "step_size": 0.25}
    direct = build(tiny(mixer="ssog", regime="ode", ode=ode)).double()
    adjoint = build(tiny(mixer="ssog", regime="ode", ode={**ode, "adjoint": True})).double()
    adjoint.load_state_dict(direct.state_dict())
    images = torch.randn(2, 3, 8, 8, dtype=torch.float64)
    for model in (direct, adjoint):
        model(images).square().sum().backward()
    for (name, p), q in zip(direct.named_parameters(), adjoint.parameters(), strict=True):
        assert (p.grad - q.grad).norm() <= 1e-2 * p.grad.norm(), name


@pytest.mark.parametrize("solver, fp32", [("dopri5", True), ("rk4", False)])
def test_adaptive_field_stays_float32_under_bf16_autocast(tiny, solver, fp32) -> None:
    """Adaptive solvers read the field for their error estimate: it runs in float32 under autocast
    (fixed-grid solvers keep autocast's speed)."""
    model = build(tiny(mixer="ssog", regime="ode", ode={"solver": solver}))
    dtypes = []
    model.blocks.block.mlp.fc1.register_forward_hook(lambda _m, _i, out: dtypes.append(out.dtype))
    images = torch.randn(2, 3, 8, 8)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(images)
    assert dtypes and set(dtypes) == ({torch.float32} if fp32 else {torch.bfloat16})
    if fp32:
        with torch.no_grad():
            exact = model(images)
        torch.testing.assert_close(out.float(), exact, atol=1e-2, rtol=1e-2)
        off = build(tiny(mixer="ssog", regime="ode", ode={"solver": solver, "field_fp32": False}))
        off.load_state_dict(model.state_dict())
        dtypes.clear()
        off.blocks.block.mlp.fc1.register_forward_hook(lambda _m, _i, out: dtypes.append(out.dtype))
        with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
            off(images)
        assert set(dtypes) == {torch.bfloat16}  # the option turns it off


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_a_regimes_backward_guard_lets_other_errors_through(tiny, regime) -> None:
    """The trainer opens every regime's guard around backward: it never hides an unrelated failure."""
    model = build(tiny(regime=regime))
    with pytest.raises(AssertionError, match="unrelated"), model.blocks.backward_guard():
        raise AssertionError("unrelated")


def test_the_adjoint_backward_guard_turns_solver_failures_into_typed_ones(tiny) -> None:
    """With the adjoint the ODE is solved again in backward: its failures end the trial like the
    forward's (SolverError naming the settings); without it, backward runs no solver."""
    adjoint = build(tiny(regime="ode", ode={"solver": "dopri5", "adjoint": True, "max_num_steps": 7}))
    with pytest.raises(SolverError, match="max_num_steps exceeded.*max_num_steps=7, adjoint=True"):
        with adjoint.blocks.backward_guard():
            raise AssertionError("max_num_steps exceeded")
    plain = build(tiny(regime="ode", ode={"solver": "dopri5"}))
    with pytest.raises(AssertionError, match="max_num_steps exceeded"), plain.blocks.backward_guard():
        raise AssertionError("max_num_steps exceeded")
