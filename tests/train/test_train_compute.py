"""Training compute per epoch (issue 26): `images_seen` and `train_flops`, cumulative, in every
epoch's metrics, so error can be read against compute at every epoch of every run."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from vitscale import data as vdata
from vitscale.models import build, flops_per_image, regime_flops_split
from vitscale.train import fit
from vitscale.train.checkpoint import CHECKPOINT_FILE, load_checkpoint, save_checkpoint

RK4_QUARTER = {"regime": "ode", "ode": {"solver": "rk4", "step_size": 0.25}}  # 4 steps x 4 = 16 NFE


@pytest.mark.parametrize(
    ("num_train", "batch_size", "per_epoch"),
    [
        (256, 64, 256),  # four full batches
        (200, 64, 192),  # train_batches drops the last partial batch: 3 x 64 are seen
        (100, 128, 100),  # a set smaller than one batch is one batch of all of it
    ],
)
def test_images_seen_counts_every_real_batch(tiny_trial, num_train, batch_size, per_epoch):
    history = fit(
        tiny_trial(data={"num_train": num_train}, train={"epochs": 2, "batch_size": batch_size})
    ).history
    assert [m["images_seen"] for m in history] == [per_epoch, 2 * per_epoch]


@pytest.mark.parametrize("regime", ["discrete", "looped"])
def test_train_flops_of_unrolled_models_are_three_forwards_per_image(tiny_trial, regime):
    result = fit(tiny_trial(model={"regime": regime, "depth": 2}, train={"epochs": 2}))
    forward = flops_per_image(result.model_config)  # built afresh: the meaning flops_per_image had
    flops = []
    for metrics in result.history:
        assert metrics["flops_per_image"] == forward
        assert metrics["train_flops"] == 3 * forward * metrics["images_seen"]
        flops.append(metrics["train_flops"])
    assert 0 < flops[0] < flops[1]


@pytest.mark.parametrize("adjoint", [False, True])
def test_ode_train_flops_follow_the_documented_formula_at_the_measured_nfe(tiny_trial, adjoint):
    """rk4 with step 0.25 over [0, depth=1]: 16 field evaluations forward, and 16 back under the
    adjoint, so every batch's cost is known by hand."""
    ode = {**RK4_QUARTER["ode"], "adjoint": adjoint}
    result = fit(tiny_trial(model={"regime": "ode", "ode": ode}, train={"epochs": 2}))
    outside, per_eval = regime_flops_split(build(result.model_config), 16)
    if adjoint:  # forward, then 2 x outside and field + vector-Jacobian product per backward step
        assert result.metrics["nfe_backward_mean"] == 16
        per_image = (outside + per_eval * 16) + 2 * outside + 3 * per_eval * 16
    else:  # backprop through the solver: backward = 2 x forward
        assert "nfe_backward_mean" not in result.metrics
        per_image = 3 * (outside + per_eval * 16)
    for epoch, metrics in enumerate(result.history, start=1):
        assert metrics["nfe_mean"] == 16
        assert metrics["images_seen"] == 256 * epoch
        assert metrics["train_flops"] == 256 * epoch * per_image
        assert metrics["flops_per_image"] == outside + per_eval * metrics["val_nfe_mean"]


@pytest.mark.parametrize("adjoint", [False, True])
def test_adaptive_ode_train_flops_use_each_batchs_own_nfe(tiny_trial, adjoint):
    """dopri5 at tight tolerances and a high learning rate: NFE changes within and across epochs,
    so only the formula at the NFE each batch took gives the total (4 equal batches an epoch:
    the epoch's mean NFE x 4 is its sum), not the NFE of the initial count."""
    ode = {"solver": "dopri5", "rtol": 1e-6, "atol": 1e-7, "adjoint": adjoint}
    # timm's small init: its field grows under training, so dopri5's step count moves with it
    model = {"regime": "ode", "ode": ode, "init": "timm"}
    result = fit(tiny_trial(model=model, train={"epochs": 2, "lr": 3e-2}))
    outside, per_eval = regime_flops_split(build(result.model_config), 16)
    steps, batch = 4, 64
    total = 0.0
    for metrics in result.history:
        forward_nfe = metrics["nfe_mean"] * steps
        if adjoint:
            backward_nfe = metrics["nfe_backward_mean"] * steps
            total += batch * (3 * steps * outside + per_eval * (forward_nfe + 3 * backward_nfe))
        else:
            total += batch * 3 * (steps * outside + per_eval * forward_nfe)
        assert metrics["train_flops"] == pytest.approx(total, rel=1e-12)
    assert len({m["nfe_mean"] for m in result.history}) > 1  # the NFE did change


@pytest.mark.parametrize("model", [{"regime": "discrete"}, RK4_QUARTER])
def test_train_resolutions_count_each_batch_at_its_own_side(tiny_trial, model):
    config = tiny_trial(model=model, data={"train_resolutions": [16, 24]}, train={"epochs": 2})
    result = fit(config)
    # The sides fit drew: replay its data generator (nothing else draws from it).
    bundle = vdata.load(config.data, torch.device("cpu"))
    generator = vdata.make_generator(bundle, config.train.seed)
    net = build(result.model_config)
    per_image = {}
    for side in (16, 24):
        outside, unit = regime_flops_split(net, side)  # the whole stack where no NFE is counted
        per_image[side] = 3 * (outside + unit * (16 if model["regime"] == "ode" else 1))
    total, images, drawn = 0, 0, []
    for metrics in result.history:
        for batch, _ in vdata.train_batches(bundle, config.data, config.train.batch_size, generator):
            side = batch.shape[-1]
            drawn.append(side)
            images += batch.shape[0]
            total += batch.shape[0] * per_image[side]
        assert metrics["images_seen"] == images
        assert metrics["train_flops"] == total
    assert set(drawn) == {16, 24}  # both sides were met, and they cost differently
    assert per_image[24] > per_image[16]
    assert result.metrics["train_flops"] != 3 * result.metrics["flops_per_image"] * images


class Stop(Exception):
    """Stands in for a killed worker after an epoch's checkpoint is written."""


def _stop_after_one(metrics, _dir):
    if metrics["epoch"] == 1:
        raise Stop


def test_totals_continue_after_resume_and_are_left_out_when_a_checkpoint_lacks_them(tiny_trial, tmp_path):
    config = tiny_trial(train={"epochs": 2})
    straight = fit(config).history
    with pytest.raises(Stop):
        fit(config, report=_stop_after_one, checkpoint_dir=tmp_path / "a")
    resumed = fit(config, checkpoint_dir=tmp_path / "a").history
    assert [m["train_flops"] for m in resumed] == [m["train_flops"] for m in straight]
    assert [m["images_seen"] for m in resumed] == [256, 512]

    with pytest.raises(Stop):  # a checkpoint written before the totals were reported
        fit(config, report=_stop_after_one, checkpoint_dir=tmp_path / "b")
    state = load_checkpoint(tmp_path / "b" / CHECKPOINT_FILE)
    legacy = [{k: v for k, v in m.items() if k not in ("images_seen", "train_flops")} for m in state.history]
    save_checkpoint(tmp_path / "b", dataclasses.replace(state, history=legacy))
    final = fit(config, checkpoint_dir=tmp_path / "b").metrics
    assert final["epoch"] == 2 and "train_flops" not in final and "images_seen" not in final
