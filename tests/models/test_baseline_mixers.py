"""The four baselines (axial, linear, pooling, fourier): each equals a slow reference written
independently here, has the parameter count worked out by hand, the cost exponent it claims,
and (pooling, fourier) the exact operator norm as its Lipschitz bound."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from vitscale.cli import main
from vitscale.models import MIXERS, ModelConfig, lipschitz_bound, mixing_flops

C, HEADS = 12, 3
TI = ["--width", "192", "--depth", "12", "--heads", "3", "--patch-size", "16", "--num-classes", "100"]
SLOPE_LIMIT = {"axial": 1.6, "linear": 1.1, "pooling": 1.1, "fourier": 1.2}


def make(tiny, mixer: str, **settings):
    config = tiny(mixer=mixer, width=C, heads=HEADS, **({mixer: settings} if settings else {}))
    return MIXERS[mixer](config).double()


def qkv(mixer, x):
    b, t, _ = x.shape
    out = mixer.qkv(x).reshape(b, t, 3, mixer.heads, mixer.head_dim).permute(2, 0, 3, 1, 4)
    return out.unbind(0)  # (B, heads, T, d) each


def merge(mixer, out):
    b, _, t, _ = out.shape
    return mixer.proj(out.transpose(1, 2).reshape(b, t, -1))


def axial_reference(mixer, x, grid_hw, rows_first=True):
    """Full N x N logits, masked to each token's row (then column), softmax, applied in turn."""
    q, k, v = qkv(mixer, x)
    t, (gh, gw) = x.shape[1], grid_hw
    p = t - gh * gw
    logits = (q @ k.transpose(-2, -1)) * mixer.head_dim**-0.5  # (B, h, T, T)
    idx = torch.arange(gh * gw)
    same_row = (idx[:, None] // gw) == (idx[None, :] // gw)
    same_col = (idx[:, None] % gw) == (idx[None, :] % gw)
    grid = logits[..., p:, p:]
    a_row = torch.softmax(grid.masked_fill(~same_row, -math.inf), -1)
    a_col = torch.softmax(grid.masked_fill(~same_col, -math.inf), -1)
    first, second = (a_row, a_col) if rows_first else (a_col, a_row)
    mixed = second @ (first @ v[..., p:, :])
    prefix = torch.softmax(logits[..., :p, :], -1) @ v  # prefix rows: full attention over all tokens
    return merge(mixer, torch.cat([prefix, mixed], dim=2))


def linear_reference(mixer, x):
    """The same kernel in its O(N²) form: A = φ(Q)φ(K)ᵀ, rows normalised."""
    q, k, v = qkv(mixer, x)
    phi_q, phi_k = F.elu(q) + 1, F.elu(k) + 1
    a = phi_q @ phi_k.transpose(-2, -1)  # (B, h, T, T)
    return merge(mixer, (a @ v) / (a.sum(-1, keepdim=True) + mixer.eps))


def grid_of(x, grid_hw):
    b, t, c = x.shape
    p = t - grid_hw[0] * grid_hw[1]
    return p, x[:, p:].reshape(b, *grid_hw, c)


def pooling_reference(mixer, x, grid_hw):
    p, grid = grid_of(x, grid_hw)
    k = mixer.pool_size
    nchw = grid.permute(0, 3, 1, 2)
    pooled = F.avg_pool2d(nchw, k, 1, k // 2, count_include_pad=False) - nchw
    mixed = pooled.permute(0, 2, 3, 1).reshape(x.shape[0], -1, x.shape[-1])
    prefix = x[:, p:].mean(1, keepdim=True).expand(-1, p, -1)
    return torch.cat([prefix, mixed], dim=1)


def fourier_reference(x, grid_hw):
    p, grid = grid_of(x, grid_hw)
    spectrum = torch.fft.fft2(grid.permute(0, 3, 1, 2), norm="ortho").real.permute(0, 2, 3, 1)
    mixed = spectrum.reshape(x.shape[0], -1, x.shape[-1])
    dc = grid.sum((1, 2)) / math.sqrt(grid_hw[0] * grid_hw[1])  # the (0, 0) bin
    return torch.cat([dc[:, None].expand(-1, p, -1), mixed], dim=1)


@pytest.mark.parametrize("grid_hw", [(4, 4), (3, 5), (1, 6)])
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_each_mixer_equals_its_reference(tiny, grid_hw, prefix) -> None:
    x = torch.randn(2, prefix + grid_hw[0] * grid_hw[1], C, dtype=torch.float64)
    for order in ("rows_first", "columns_first"):
        axial = make(tiny, "axial", order=order)
        expect = axial_reference(axial, x, grid_hw, order == "rows_first")
        torch.testing.assert_close(axial(x, grid_hw), expect, atol=1e-5, rtol=1e-5)
    linear = make(tiny, "linear")
    torch.testing.assert_close(linear(x, grid_hw), linear_reference(linear, x), atol=1e-5, rtol=1e-5)
    for k in (1, 3, 5):
        pooling = make(tiny, "pooling", pool_size=k)
        torch.testing.assert_close(
            pooling(x, grid_hw), pooling_reference(pooling, x, grid_hw), atol=1e-5, rtol=1e-5
        )
    fourier = make(tiny, "fourier")
    torch.testing.assert_close(fourier(x, grid_hw), fourier_reference(x, grid_hw), atol=1e-5, rtol=1e-5)


def test_fourier_over_channels_is_the_3d_transform(tiny) -> None:
    fourier = make(tiny, "fourier", channels=True)
    x = torch.randn(2, 16, C, dtype=torch.float64)
    expect = torch.fft.fftn(x.reshape(2, 4, 4, C), dim=(1, 2, 3), norm="ortho").real.reshape(2, 16, C)
    torch.testing.assert_close(fourier(x, (4, 4)), expect)


def dense_operator(mixer, grid_hw, prefix) -> torch.Tensor:
    """The token operator of a channel-wise linear mixer, column by column (one channel)."""
    t = prefix + grid_hw[0] * grid_hw[1]
    eye = torch.eye(t, dtype=torch.float64)[:, :, None].expand(t, t, mixer.width).contiguous()
    return mixer(eye, grid_hw)[..., 0].T  # column j = image of e_j


@pytest.mark.parametrize("grid_hw", [(4, 4), (3, 6), (5, 5)])
@pytest.mark.parametrize("prefix", [0, 1])
def test_linear_mixers_bound_is_their_exact_operator_norm(tiny, grid_hw, prefix) -> None:
    for mixer in (make(tiny, "pooling"), make(tiny, "pooling", pool_size=5), make(tiny, "fourier")):
        norm = torch.linalg.matrix_norm(dense_operator(mixer, grid_hw, prefix), 2).item()
        assert lipschitz_bound(mixer, grid_hw, prefix_tokens=prefix) == pytest.approx(norm, rel=1e-9)


def test_pooling_bound_beyond_the_dense_limit_matches_the_dense_one(tiny, monkeypatch) -> None:
    from vitscale.models.mixers import pooling

    mixer = make(tiny, "pooling")
    dense = lipschitz_bound(mixer, (12, 12), 1)
    monkeypatch.setattr(pooling, "DENSE_LIMIT", 10)
    assert lipschitz_bound(mixer, (12, 12), 1) == pytest.approx(dense, rel=1e-8)


def test_fft_flops_are_the_standard_count(tiny) -> None:
    n = 6 * 10
    assert mixing_flops(make(tiny, "fourier").float(), (6, 10), prefix_tokens=0) == int(
        5 * n * math.log2(n) * C
    )
    assert mixing_flops(make(tiny, "pooling").float(), (6, 10), prefix_tokens=0) == n * C * 10


def model_info(capsys, mixer: str) -> list[dict]:
    main(["model", "info", "--mixer", mixer, *TI, "-r", "768", "-r", "1024", "--json"])
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("mixer", sorted(SLOPE_LIMIT))
def test_model_info_parameters_by_hand_and_mixing_cost_exponent(capsys, mixer) -> None:
    width, depth, classes, patch = 192, 12, 100, 16
    rows = model_info(capsys, mixer)
    for row, side in zip(rows, (768, 1024), strict=True):
        tokens = (side // patch) ** 2
        embed = 3 * patch * patch * width + width  # patch conv
        pos = (1 + tokens) * width
        block = 2 * 2 * width + (width * 4 * width + 4 * width) + (4 * width * width + width)  # norms + MLP
        attention = 4 * width * width + 4 * width  # qkv + proj, with biases
        head = 2 * width + width * classes + classes  # final norm + head
        expected = {
            "axial": embed
            + width
            + pos
            + depth * (block + attention)
            + head,  # attention's, as its docstring says
            # attention's, plus LayerScale's two C-vectors per block (it asks for LayerScale)
            "linear": embed + width + pos + depth * (block + attention + 2 * width) + head,
            "fourier": embed + width + pos + depth * block + head,
            "pooling": embed + width + depth * block + head,  # declines the position embedding
        }[mixer]
        assert row["params"] == expected, (side, row["params"], expected)
    slope = math.log(rows[1]["mixing_flops"] / rows[0]["mixing_flops"]) / math.log(4096 / 2304)
    assert 0.9 < slope <= SLOPE_LIMIT[mixer], slope
    assert (rows[0]["lipschitz_bound"] is None) == (mixer in ("axial", "linear"))


def test_attention_mixing_slope_is_about_two(capsys) -> None:
    rows = model_info(capsys, "attention")
    slope = math.log(rows[1]["mixing_flops"] / rows[0]["mixing_flops"]) / math.log(4096 / 2304)
    assert slope == pytest.approx(2.0, abs=0.02)


def test_pool_size_must_be_odd(tiny) -> None:
    with pytest.raises(ValueError, match="pooling.pool_size"):
        tiny(mixer="pooling", pooling={"pool_size": 2})
    assert np.isfinite(lipschitz_bound(make(tiny, "pooling", pool_size=7), (2, 2), 1))


@pytest.mark.parametrize("regime", ["discrete", "looped", "ode"])
def test_linear_attention_gets_layer_scale_where_its_regime_builds_none(regime) -> None:
    """Its own default fills only the discrete regime's gap; an explicit value always wins."""
    base = {"mixer": "linear", "regime": regime, "width": 16, "heads": 2}
    assert ModelConfig(**base).resolved_layer_scale == pytest.approx(0.1)
    assert ModelConfig(**base, layer_scale=0).resolved_layer_scale == 0.0
    assert ModelConfig(**{**base, "mixer": "attention"}).resolved_layer_scale == (
        0.0 if regime == "discrete" else 0.1
    )
