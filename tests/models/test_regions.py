"""Regional torch.compile (`vitscale.models.regions`): each regime compiles what repeats, once.

Real compiles of tiny models (a few seconds each on the CPU): the point is what dynamo does with
them, which no stand-in shows.
"""

from __future__ import annotations

import copy
import shutil

import pytest
import torch
import torch._dynamo
from torch._dynamo.exc import FailOnRecompileLimitHit

from vitscale.models import build, regions
from vitscale.models.measure import regime_flops_split

# inductor builds its CPU kernels with a C++ compiler
pytestmark = pytest.mark.skipif(
    not any(shutil.which(cxx) for cxx in ("g++", "clang++", "c++")),
    reason="torch.compile needs a C++ compiler",
)

MIDPOINT = {"solver": "midpoint", "step_size": 0.5}  # 4 steps x 2 evaluations over [0, 2]


def _train_steps(model: torch.nn.Module, steps: int = 3) -> torch.Tensor:
    images = torch.randn(4, 3, 8, 8, generator=torch.Generator().manual_seed(1))
    for _ in range(steps):
        model.zero_grad(set_to_none=True)
        out = model(images)
        out.square().mean().backward()
    return out


@pytest.fixture(autouse=True)
def _fresh_dynamo():
    torch.compiler.reset()
    yield
    torch.compiler.reset()


def test_a_compiled_ode_model_evaluates_one_graph_and_never_recompiles(tiny) -> None:
    limits = torch._dynamo.config.patch(recompile_limit=1, fail_on_recompile_limit_hit=True)
    whole = build(tiny(mixer="attention", regime="ode", ode=MIDPOINT))
    # what whole-model compile did: the solver's step recompiled at every field evaluation (the
    # guards are dynamo's whatever the backend; "eager" spares generating the kernels)
    with limits, pytest.raises(FailOnRecompileLimitHit):
        _train_steps(torch.compile(whole, backend="eager"))
    torch.compiler.reset()

    model = regions.compile_regions(build(tiny(mixer="attention", regime="ode", ode=MIDPOINT)))
    torch._dynamo.utils.counters.clear()
    with limits:
        _train_steps(model)
    assert model.last_nfe == 8
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1  # one field evaluation's graph


@pytest.mark.parametrize("regime", ["discrete", "ode"])  # looped runs the same `stack` as discrete
def test_compiled_regions_compute_what_the_eager_model_does(tiny, regime: str) -> None:
    settings = {"ode": MIDPOINT} if regime == "ode" else {}
    eager = build(tiny(mixer="attention", regime=regime, **settings))
    model = copy.deepcopy(eager)
    regions.compile_regions(model)
    assert [str(r.region_setting) for r in regions.regions(model)] == ["compiled(default, dynamic=None)"]
    torch.testing.assert_close(_train_steps(model, 1), _train_steps(eager, 1), atol=1e-5, rtol=1e-4)
    for (name, a), b in zip(model.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(a.grad, b.grad, atol=1e-5, rtol=1e-4, msg=name)


def test_flop_counts_and_copies_of_a_compiled_model_stay_its_own(tiny) -> None:
    model = build(tiny(mixer="attention", regime="ode", ode=MIDPOINT))
    counted = regime_flops_split(model, 8)
    regions.compile_regions(model)
    _train_steps(model, 1)
    # FLOPs are counted eagerly (a compiled graph hides aten ops and module names), then compiled again
    assert regime_flops_split(model, 8) == counted
    assert str(regions.regions(model)[0].region_setting) == "compiled(default, dynamic=None)"
    # a deep copy (the served model) runs its own weights, not the original's through a bound method
    twin = copy.deepcopy(model)
    with torch.no_grad():
        for p in twin.parameters():
            p.zero_()
    images = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert not torch.allclose(twin(images), model(images))


def test_a_model_without_regimes_is_compiled_whole() -> None:
    plain = torch.nn.Linear(3, 2)
    compiled = regions.compile_regions(plain)
    assert compiled is not plain and compiled._orig_mod is plain
