"""Every mixer x regime trains: a few steps lower the loss and every parameter gets a gradient.

Parametrised over the registries, so a newly registered mixer or regime is tested for free.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F

from vitscale.models import MIXERS, REGIMES, build

CASES = [(m, r, {}) for m, r in itertools.product(sorted(MIXERS), sorted(REGIMES))]
CASES += [(m, "ode", {"adjoint": True}) for m in sorted(MIXERS)]
CASES += [("attention", "discrete", {}, "math")]


def _id(case) -> str:
    return "-".join(str(part) for part in case if part not in ({}, None)).replace(
        "{'adjoint': True}", "adjoint"
    )


@pytest.mark.parametrize("case", CASES, ids=_id)
def test_few_steps_reduce_loss_and_reach_every_parameter(tiny, case) -> None:
    mixer, regime, ode, *backend = case
    config = tiny(
        mixer=mixer, regime=regime, ode=ode, attention={"backend": backend[0] if backend else "sdpa"}
    )
    model = build(config)
    images, labels = torch.randn(8, 3, 8, 8), torch.randint(0, config.num_classes, (8,))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    losses = []
    for step in range(6):
        opt.zero_grad()
        loss = F.cross_entropy(model(images), labels)
        loss.backward()
        if step == 0:
            missing = [n for n, p in model.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0]
            assert not missing, f"no gradient reaches {missing}"
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0], losses
    assert (model.last_nfe is None) == (regime != "ode")
