"""Optimiser groups: AdamW decays weight matrices only; every model part declares its exemptions."""

from __future__ import annotations

import json

import pytest
import torch

from vitscale.cli import main
from vitscale.models import MIXERS, REGIMES, ModelConfig, build
from vitscale.train.config import TrainConfig
from vitscale.train.loop import make_optimizer


def _model(mixer: str, regime: str):
    return build(ModelConfig(mixer=mixer, regime=regime, width=16, heads=2, depth=2, image_size=16))


@pytest.mark.parametrize("regime", sorted(REGIMES))
@pytest.mark.parametrize("mixer", sorted(MIXERS))
def test_decayed_group_holds_only_weight_matrices(mixer, regime):
    model = _model(mixer, regime)
    optimizer = make_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.05))
    decay, *no_decay_groups = optimizer.param_groups
    assert decay["weight_decay"] == 0.05 and {g["weight_decay"] for g in no_decay_groups} == {0.0}
    no_decay = {"params": [p for g in no_decay_groups for p in g["params"]]}
    names = {id(p): n for n, p in model.named_parameters()}
    decayed = [names[id(p)] for p in decay["params"]]
    assert decayed and all(
        n.endswith(".weight") and p.ndim >= 2 for n, p in zip(decayed, decay["params"], strict=True)
    )
    assert not any(part in n for n in decayed for part in ("pos_embed", "cls_token", "norm", "gamma"))
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


def test_ssog_kernels_position_embedding_and_cls_token_are_exempt():
    model = build(ModelConfig(mixer="ssog", regime="discrete", depth=2, pos_embed=True))
    names = model.no_weight_decay()
    assert {"pos_embed", "cls_token"} <= names
    for i in range(2):
        assert {f"blocks.blocks.{i}.mixer.{p}" for p in ("log_sigma", "offset", "mix")} <= names
    no_offsets = build(ModelConfig(mixer="ssog", ssog={"offsets": False}, depth=1))
    assert not any(n.endswith("offset") for n in no_offsets.no_weight_decay())  # absent: not listed


def test_adamw_leaves_ssog_kernels_alone_without_gradient():
    """With zero gradients, one AdamW step changes decayed weights and nothing exempt."""
    model = _model("ssog", "discrete")
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    optimizer = make_optimizer(model, TrainConfig(lr=1e-2, weight_decay=0.5))
    for p in model.parameters():
        p.grad = torch.zeros_like(p)
    optimizer.step()
    exempt = model.no_weight_decay()
    for name, p in model.named_parameters():
        moved = not torch.equal(p, before[name])
        assert moved == (name not in exempt and bool(before[name].abs().sum() > 0)), name


def test_model_info_json_names_the_exempt_parameters(capsys):
    main(["model", "info", "--mixer", "ssog", "--regime", "looped", "--width", "32", "--heads", "2",
          "--depth", "2", "--patch-size", "4", "-r", "32", "--pos-embed", "--json"])  # fmt: skip
    [row] = json.loads(capsys.readouterr().out)
    names = set(row["no_weight_decay"])
    assert {"pos_embed", "cls_token"} <= names
    assert {f"blocks.block.mixer.{p}" for p in ("log_sigma", "offset", "mix")} <= names
    assert {"blocks.block.ls1.gamma", "blocks.block.ls2.gamma"} <= names  # looped default: LayerScale


def test_discrete_attention_is_the_standard_vit_by_default():
    model = build(ModelConfig(mixer="attention", regime="discrete", width=192, depth=12, heads=3,
                              patch_size=16, image_size=224, num_classes=1000))  # fmt: skip
    assert sum(p.numel() for p in model.parameters()) == 5_717_416  # timm vit_tiny_patch16_224
    assert not any("gamma" in n or "q_norm" in n for n, _ in model.named_parameters())


def test_ssog_kernel_widths_and_offsets_train_at_their_own_learning_rate():
    """`model.ssog.kernel_lr_scale` multiplies the lr of log_sigma and offset only, and the schedule
    keeps the ratio (LambdaLR scales every group's initial lr alike)."""
    model = build(
        ModelConfig(mixer="ssog", width=16, heads=2, depth=2, image_size=16, ssog={"kernel_lr_scale": 7.0})
    )
    optimizer = make_optimizer(model, TrainConfig(lr=1e-3, weight_decay=0.05))
    names = {id(p): n for n, p in model.named_parameters()}
    lr_of = {names[id(p)]: g["lr"] for g in optimizer.param_groups for p in g["params"]}
    for name, lr in lr_of.items():
        kernel = name.endswith(("log_sigma", "offset"))
        assert lr == pytest.approx(7e-3 if kernel else 1e-3), name
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)  # the lr the loop reports
    attention = make_optimizer(_model("attention", "looped"), TrainConfig(lr=1e-3))
    assert {g["lr"] for g in attention.param_groups} == {1e-3}


def test_the_fused_optimizer_takes_the_same_steps_as_the_per_tensor_loop():
    """On CPU the trainer's AdamW is torch's fused kernel (one kernel, not one per tensor); it must
    move every parameter as the per-tensor implementation does, decay groups and lr scales included."""
    torch.manual_seed(0)
    fused_model = _model("ssog", "discrete")
    loop_model = _model("ssog", "discrete")
    loop_model.load_state_dict(fused_model.state_dict())
    config = TrainConfig(lr=1e-2, weight_decay=0.05)
    fused = make_optimizer(fused_model, config)
    assert fused.defaults["fused"] is True
    loop = make_optimizer(loop_model, config)
    for group in loop.param_groups:
        group["fused"] = None
    images = torch.randn(4, 3, 16, 16)
    for _ in range(3):
        for model, optimizer in ((fused_model, fused), (loop_model, loop)):
            model(images).square().mean().backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
    for (name, a), b in zip(fused_model.named_parameters(), loop_model.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6, msg=name)
