"""The ViT around the mixers: standard sizes, other resolutions, position embedding."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from vitscale.models import MIXERS, REGIMES, ModelConfig, build, count_params
from vitscale.models.init import sincos_grid
from vitscale.models.vit import resample_pos_embed

STANDARD = {  # timm vit_{tiny,small,base}_patch16_224, 1000 classes
    (192, 3): 5_717_416,
    (384, 6): 22_050_664,
    (768, 12): 86_567_656,
}


@pytest.mark.parametrize(("size", "params"), list(STANDARD.items()), ids=["Ti", "S", "B"])
def test_attention_discrete_has_the_standard_vit_parameter_count(size, params) -> None:
    width, heads = size
    config = ModelConfig(width=width, heads=heads, depth=12, patch_size=16, image_size=224, num_classes=1000)
    with torch.device("meta"):  # counting only: no memory, no init work
        assert count_params(build(config)) == params


@pytest.mark.parametrize("mixer", sorted(MIXERS))
@pytest.mark.parametrize("regime", sorted(REGIMES))
def test_a_32px_model_runs_at_other_sizes(mixer: str, regime: str) -> None:
    model = build(
        ModelConfig(mixer=mixer, regime=regime, width=16, heads=2, depth=2, patch_size=4, image_size=32)
    )
    for size in [(32, 32), (64, 64), (48, 32)]:
        out = model(torch.randn(2, 3, *size))
        assert out.shape == (2, 10) and torch.isfinite(out).all()


def test_pos_embed_resample_is_identity_at_the_build_grid_and_smooth_elsewhere() -> None:
    pos = torch.randn(1, 1 + 16, 8)
    assert resample_pos_embed(pos, (4, 4), (4, 4), 1) is pos
    big = resample_pos_embed(pos, (4, 4), (8, 6), 1)
    assert big.shape == (1, 1 + 48, 8)
    torch.testing.assert_close(big[:, :1], pos[:, :1])  # the cls entry is never resampled


def _timm_resample_abs_pos_embed(posemb, new_size, old_size, num_prefix_tokens=1):
    """timm.layers.pos_embed.resample_abs_pos_embed (bicubic, antialias=True), written out."""
    prefix, grid = posemb[:, :num_prefix_tokens], posemb[:, num_prefix_tokens:]
    dim = grid.shape[-1]
    grid = grid.float().reshape(1, old_size[0], old_size[1], -1).permute(0, 3, 1, 2)
    grid = F.interpolate(grid, size=new_size, mode="bicubic", antialias=True, align_corners=False)
    grid = grid.permute(0, 2, 3, 1).reshape(1, -1, dim).to(posemb.dtype)
    return torch.cat([prefix, grid], dim=1)


@pytest.mark.parametrize("new_hw", [(5, 5), (2, 2), (6, 4)], ids=["up", "down", "oblong"])
def test_pos_embed_resample_equals_timms_formula(new_hw) -> None:
    """Evaluating at another resolution resamples the learned embedding as timm does, and the
    model's embedding of a larger image is patch tokens plus exactly that."""
    torch.manual_seed(0)
    pos = torch.randn(1, 1 + 9, 6)
    expected = _timm_resample_abs_pos_embed(pos, new_hw, (3, 3))
    torch.testing.assert_close(resample_pos_embed(pos, (3, 3), new_hw, 1), expected, rtol=0, atol=0)
    model = build(
        {"mixer": "attention", "width": 8, "heads": 2, "depth": 1, "patch_size": 4, "image_size": 12}
    )
    images = torch.randn(2, 3, 4 * new_hw[0], 4 * new_hw[1])
    tokens, grid_hw = model.embed(images)
    patches = model.patch_embed(images).flatten(2).transpose(1, 2)
    plain = torch.cat([model.cls_token.expand(2, -1, -1), patches], dim=1)
    reference = _timm_resample_abs_pos_embed(model.pos_embed, new_hw, (3, 3))
    assert grid_hw == new_hw
    torch.testing.assert_close(tokens, plain + reference, rtol=0, atol=0)


def test_pos_embed_default_follows_the_mixer_and_can_be_overridden() -> None:
    def has_pos(**kw) -> bool:
        return build(ModelConfig(width=16, heads=2, **kw)).pos_embed is not None

    assert has_pos(mixer="attention") and not has_pos(mixer="ssog")
    assert has_pos(mixer="ssog", pos_embed=True) and not has_pos(mixer="attention", pos_embed=False)


def test_input_not_divisible_by_patch_is_rejected() -> None:
    model = build(ModelConfig(width=16, heads=2, patch_size=4))
    with pytest.raises(ValueError, match="not divisible by the patch size 4"):
        model(torch.randn(1, 3, 30, 32))


def test_build_accepts_a_mapping_and_validates_it() -> None:
    assert build({"width": 16, "heads": 2}).config.width == 16
    with pytest.raises(ValueError, match="heads"):
        build({"width": 16, "heads": 3})


def test_scaled_init_scales_linears_by_fan_in_and_codes_position_as_sincos() -> None:
    """`model.init: scaled`: std 1/sqrt(3 fan_in) (timm's 0.02 at width 768), a 2-D sine-cosine
    position code on the grid and zero on the cls slot; `timm`: 0.02 everywhere."""
    scaled = build({"width": 64, "depth": 2, "heads": 4, "patch_size": 4, "image_size": 32})
    timm = build({"width": 64, "depth": 2, "heads": 4, "patch_size": 4, "image_size": 32, "init": "timm"})
    fc1, fc2 = scaled.blocks.blocks[0].mlp.fc1.weight, scaled.blocks.blocks[0].mlp.fc2.weight
    assert (
        abs(fc1.std().item() - (3 * 64) ** -0.5) < 0.01 and abs(fc2.std().item() - (3 * 256) ** -0.5) < 0.005
    )
    assert abs(timm.blocks.blocks[0].mlp.fc1.weight.std().item() - 0.02) < 0.002
    assert torch.equal(scaled.pos_embed[0, 0], torch.zeros(64))
    grid = scaled.pos_embed[0, 1:]
    assert torch.equal(grid, sincos_grid((8, 8), 64)) and grid.abs().max() <= 1
    assert len({tuple(row.tolist()) for row in grid}) == 64  # every token has its own code
    assert timm.pos_embed.std().item() < 0.03
    assert (3 * 768) ** -0.5 == pytest.approx(0.0208, abs=1e-4)
