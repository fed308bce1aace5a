"""SSoG's separable application equals the dense N x N operator it stands for."""

from __future__ import annotations

import pytest
import torch

from vitscale.models import ModelConfig, build
from vitscale.models.mixers.ssog import SSoG


def randomise(mixer: SSoG) -> SSoG:
    """Move every kernel parameter off its symmetric init, so the test sees offsets and signs."""
    with torch.no_grad():
        mixer.log_sigma.add_(0.5 * torch.randn_like(mixer.log_sigma))
        mixer.mix.copy_(torch.randn_like(mixer.mix))
        if mixer.offset is not None:
            mixer.offset.copy_(0.3 * torch.randn_like(mixer.offset))
    return mixer


def dense_reference(mixer: SSoG, x: torch.Tensor, grid_hw: tuple[int, int]) -> torch.Tensor:
    """The same mixer with D_h = sum_k w_hk kron(A_rows, A_cols) materialised (N x N per head)."""
    b, t, c = x.shape
    n = grid_hw[0] * grid_hw[1]
    p = t - n
    rows, cols = mixer.kernels(grid_hw)
    dense = torch.stack(
        [
            sum(mixer.mix[h, k] * torch.kron(rows[h, k], cols[h, k]) for k in range(mixer.num_gaussians))
            for h in range(mixer.heads)
        ]
    )  # (heads, N, N)
    v = mixer.v(x)
    grid = v[:, p:].reshape(b, n, mixer.heads, mixer.head_dim)
    mixed = torch.einsum("hnm,bmhd->bnhd", dense, grid).reshape(b, n, c)
    prefix = mixed.mean(1, keepdim=True).expand(b, p, c)
    return mixer.out(torch.cat([prefix, mixed], dim=1))


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("grid_hw", [(4, 4), (3, 5), (6, 2), (1, 7)])
@pytest.mark.parametrize("offsets", [True, False])
@pytest.mark.parametrize("prefix", [0, 1, 2])
def test_separable_equals_dense(tiny, k: int, grid_hw: tuple[int, int], offsets: bool, prefix: int) -> None:
    mixer = randomise(
        SSoG(tiny(mixer="ssog", width=12, heads=3, ssog={"num_gaussians": k, "offsets": offsets}))
    ).double()
    x = torch.randn(2, prefix + grid_hw[0] * grid_hw[1], 12, dtype=torch.float64)
    torch.testing.assert_close(mixer(x, grid_hw), dense_reference(mixer, x, grid_hw), atol=1e-5, rtol=1e-5)


def test_kernels_are_row_normalised_gaussians_in_grid_coordinates(tiny) -> None:
    mixer = randomise(SSoG(tiny(mixer="ssog")))
    for grid_hw in [(4, 4), (16, 8)]:
        rows, cols = mixer.kernels(grid_hw)
        assert rows.shape == (mixer.heads, mixer.num_gaussians, grid_hw[0], grid_hw[0])
        assert cols.shape == (mixer.heads, mixer.num_gaussians, grid_hw[1], grid_hw[1])
        torch.testing.assert_close(rows.sum(-1), torch.ones_like(rows[..., 0]))
    # Coordinates are normalised: a kernel on a 2x finer grid samples the same Gaussian.
    fine, _ = mixer.kernels((32, 32))
    coarse, _ = mixer.kernels((16, 16))
    assert torch.allclose(fine[..., 16, ::2].argmax(-1), coarse[..., 8, :].argmax(-1))


def test_tiny_widths_stay_finite(tiny) -> None:
    mixer = SSoG(tiny(mixer="ssog"))
    with torch.no_grad():
        mixer.log_sigma.fill_(-20.0)  # sigma ~ 2e-9: every row collapses to its nearest token
        mixer.offset.fill_(0.37)
    out = mixer(torch.randn(1, 17, 16), (4, 4))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("side", [4, 7, 14])
def test_initial_widths_span_half_a_token_to_the_grid_so_no_kernel_starts_as_the_identity(side):
    """Widths relative to the grid: on a 4x4 grid fixed image fractions (0.03 of the side) gave
    kernels whose self-weight exceeded 0.99 and whose width gradient was ~0."""
    config = ModelConfig(mixer="ssog", width=32, heads=4, patch_size=4, image_size=4 * side)
    mixer = build(config).blocks.blocks[0].mixer
    sigma = mixer.log_sigma.exp()
    assert sigma.min().item() == pytest.approx(0.5 / side, rel=1e-5)
    assert sigma.max().item() == pytest.approx(1.0, rel=1e-5)
    rows, _ = mixer.kernels((side, side))
    self_weight = rows.diagonal(dim1=-2, dim2=-1).max().item()
    assert self_weight < 0.9


def test_initial_width_range_that_is_empty_on_the_grid_is_refused():
    with pytest.raises(ValueError, match="ssog.sigma_min_tokens"):
        ModelConfig(
            mixer="ssog", patch_size=4, image_size=16, ssog={"sigma_min_tokens": 3, "sigma_max_grid": 0.5}
        )
