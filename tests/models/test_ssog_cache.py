"""SSoG's kernels kept between no-grad forwards, through `VisionTransformer`: equal to the
autograd path, built once, and rebuilt after a fused AdamW step, a load_state_dict or an EMA
update (none of which a version counter would reliably show)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vitscale import data as vdata
from vitscale.bench.timing import inference_step
from vitscale.models import ModelConfig, build
from vitscale.models.mixers.ssog import SSoG
from vitscale.train import TrialConfig
from vitscale.train.evaluate import evaluate
from vitscale.train.loop import trial_model_config

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
REGIMES = {"discrete": {}, "looped": {}, "ode": {"ode": {"solver": "rk4", "step_size": 1.0}}}
IMAGES = torch.randn(2, 3, 8, 8, generator=torch.Generator().manual_seed(1))


def _model(regime: str, seed: int = 0) -> torch.nn.Module:
    """A model whose kernel parameters are off their symmetric init (offsets, signed weights)."""
    torch.manual_seed(seed)
    model = build(ModelConfig(regime=regime, **CONFIG, **REGIMES[regime]))
    with torch.no_grad():
        for mixer in _mixers(model):
            mixer.log_sigma.add_(0.5 * torch.randn_like(mixer.log_sigma))
            mixer.mix.copy_(torch.randn_like(mixer.mix))
            mixer.offset.copy_(0.3 * torch.randn_like(mixer.offset))
    return model.eval()


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


def _no_grad_forward(model, images=IMAGES) -> torch.Tensor:
    with torch.no_grad():
        return model(images)


def _same_state(model) -> torch.nn.Module:
    """A freshly built model holding `model`'s parameters: its first forward builds every kernel."""
    fresh = build(model.config).eval()
    fresh.load_state_dict(model.state_dict())
    return fresh


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_kept_kernels_are_built_once_and_equal_the_autograd_path(regime):
    model = _model(regime)
    mixers = _mixers(model)
    calls = [_count_kernel_builds(m) for m in mixers]
    with torch.inference_mode():
        first = model(IMAGES)
    kept = _no_grad_forward(model)  # built under inference_mode, reused under no_grad
    assert [c[0] for c in calls] == [1] * len(mixers)  # two forwards, every mixer call: one build each
    with torch.enable_grad():
        autograd = model(IMAGES)
    mixer_calls = model.last_nfe if regime == "ode" else model.config.depth
    assert sum(c[0] for c in calls) == len(mixers) + mixer_calls  # with autograd: one build per call
    assert not any(m.kernel_cache.holds_entry for m in mixers)  # a grad-enabled forward keeps nothing
    torch.testing.assert_close(kept, first, rtol=0, atol=0)
    torch.testing.assert_close(kept, autograd.detach(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_kept_kernels_follow_the_grid(regime):
    model = _model(regime)
    _no_grad_forward(model)
    larger = torch.randn(2, 3, 12, 8)  # a 6x4 grid after the 4x4 one
    kept = _no_grad_forward(model, larger)
    with torch.enable_grad():
        torch.testing.assert_close(kept, model(larger).detach(), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_a_fused_adamw_step_rebuilds_the_kept_kernels(regime):
    model = _model(regime)
    try:
        optimizer = torch.optim.AdamW(model.parameters(), lr=0.3, fused=True)
    except RuntimeError as exc:  # fused AdamW needs a device torch implements it for
        pytest.skip(f"fused AdamW is not available here: {exc}")
    model.train()
    F.cross_entropy(model(torch.randn(4, 3, 8, 8)), torch.tensor([0, 1, 2, 3])).backward()
    model.eval()
    before = _no_grad_forward(model)  # kernels kept with the values before the step
    mixer = _mixers(model)[0]
    sigma = mixer.log_sigma.detach().clone()
    optimizer.step()  # fused: writes parameters without bumping their version counters
    assert not mixer.log_sigma.equal(sigma)  # the kernels the cache holds are now stale
    after = _no_grad_forward(model)
    assert not after.equal(before)
    torch.testing.assert_close(after, _no_grad_forward(_same_state(model)), rtol=0, atol=0)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_load_state_dict_rebuilds_the_kept_kernels(regime):
    model, other = _model(regime), _model(regime, seed=1)
    _no_grad_forward(model)
    model.load_state_dict(other.state_dict())
    torch.testing.assert_close(_no_grad_forward(model), _no_grad_forward(other), rtol=0, atol=0)


@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_an_in_place_ema_update_rebuilds_the_kept_kernels(regime):
    model, target = _model(regime), _model(regime, seed=1)
    before = _no_grad_forward(model)
    with torch.no_grad():
        for p, q in zip(model.parameters(), target.parameters(), strict=True):
            p.mul_(0.5).add_(q, alpha=0.5)
    after = _no_grad_forward(model)
    assert not after.equal(before)
    torch.testing.assert_close(after, _no_grad_forward(_same_state(model)), rtol=0, atol=0)


def test_a_trial_evaluation_builds_each_kernel_once_for_all_its_batches():
    """`evaluate` (every epoch's validation, the final test) runs under inference_mode: one build per
    mixer for the whole split, and after a training step (new parameters) one more."""
    config = TrialConfig.model_validate(
        {
            "model": {
                "mixer": "ssog",
                "regime": "looped",
                "width": 12,
                "depth": 3,
                "heads": 3,
                "patch_size": 4,
            },
            "data": {"dataset": "digits", "resolution": 16, "num_train": 64, "num_val": 64},
            "train": {"batch_size": 16, "eval_batch_size": 16, "threads": 1},
        }
    ).resolved()
    bundle = vdata.load(config.data)
    model = build(trial_model_config(config, bundle))
    [mixer] = _mixers(model)
    calls = _count_kernel_builds(mixer)
    first = evaluate(model, bundle, config)
    assert calls[0] == 1  # 4 batches x 3 mixer calls
    assert evaluate(model, bundle, config) == first and calls[0] == 1  # the next epoch's, unchanged
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1, fused=False)
    images = torch.randn(16, bundle.in_chans, 16, 16)
    F.cross_entropy(model(images), bundle.train_labels[:16]).backward()
    optimizer.step()
    builds_in_training = calls[0] - 1
    assert evaluate(model, bundle, config) != first
    assert calls[0] == 1 + builds_in_training + 1


def test_a_benchmark_inference_step_builds_each_kernel_once_for_all_its_repeats():
    model = _model("discrete")
    mixers = _mixers(model)
    counts = [_count_kernel_builds(m) for m in mixers]
    step = inference_step(model, IMAGES, torch.device("cpu"), "float32")
    outputs = [step() for _ in range(4)]  # warm-up and timed repeats alike
    assert [c[0] for c in counts] == [1] * len(mixers)
    assert all(o.equal(outputs[0]) for o in outputs)


def test_the_kept_column_kernel_is_materialised_over_rows(tiny):
    """Kept, step 2's operand is a real (heads, H, W, K·W) batch, not a broadcast view copied per call."""
    mixer = SSoG(tiny(mixer="ssog"))
    with torch.no_grad():
        rows, cols = mixer.operands_for((4, 6), torch.float32)
    k = mixer.num_gaussians
    assert rows.shape == (mixer.heads, 4 * k, 4)
    assert cols.shape == (mixer.heads, 4, 6, k * 6) and cols.is_contiguous()
    with torch.enable_grad():
        autograd_rows, autograd_cols = mixer.operands((4, 6))
    torch.testing.assert_close(cols, autograd_cols.expand_as(cols).detach(), rtol=0, atol=0)
    torch.testing.assert_close(rows, autograd_rows.detach(), rtol=0, atol=0)


def test_a_mixer_called_alone_checks_its_parameters_on_every_call(tiny):
    """Outside a model forward there is no scope to check once in: every call compares values."""
    mixer = SSoG(tiny(mixer="ssog"))
    x = torch.randn(2, 17, 16)
    with torch.no_grad():
        before = mixer(x, (4, 4))
        mixer.log_sigma.data.add_(0.3)  # through .data: no version bump
        after = mixer(x, (4, 4))
    assert not torch.allclose(before, after)
    torch.testing.assert_close(after, mixer(x, (4, 4)).detach(), rtol=1e-6, atol=1e-6)


def test_training_steps_see_their_own_kernels():
    model = _model("ode").train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    x, y = torch.randn(2, 3, 8, 8), torch.tensor([0, 1])
    grads = []
    for _ in range(2):
        _no_grad_forward(model)  # an eval forward between steps keeps kernels; training must not read them
        F.cross_entropy(model(x), y).backward()  # twice over a fresh graph: nothing from an old one
        grads.append(_mixers(model)[0].log_sigma.grad.clone())
        optimizer.step()
        optimizer.zero_grad()
    assert all(torch.isfinite(g).all() and g.abs().sum() > 0 for g in grads)
    assert not grads[0].equal(grads[1])


def test_bfloat16_autocast_keeps_the_kernels_in_bfloat16():
    model = build(ModelConfig(regime="discrete", **CONFIG)).eval()
    dtypes = []
    for mixer in _mixers(model):
        original = mixer.operands_for
        mixer.operands_for = lambda grid, dtype, f=original: dtypes.append(dtype) or f(grid, dtype)
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(torch.randn(2, 3, 8, 8))
    assert torch.isfinite(out).all()
    assert dtypes and set(dtypes) == {torch.bfloat16}
