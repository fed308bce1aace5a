"""What a model costs and how smooth its SSoG mixers are: params, FLOPs, Lipschitz bounds.

FLOPs are counted by torch.utils.flop_counter.FlopCounterMode on a real forward (matmul
family only: the convention of ViT FLOP tables; one multiply-add = 2 FLOPs). On CPU,
F.scaled_dot_product_attention dispatches to an op FlopCounterMode does not know (it
would count 0), so that op gets the standard SDPA formula here.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from vitscale.models.config import ModelConfig
from vitscale.models.mixers.ssog import SSoG
from vitscale.models.vit import VisionTransformer, build

aten = torch.ops.aten


def _cpu_sdpa(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


def _cpu_sdpa_backward(
    grad_out_shape, query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs
) -> int:
    return sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape)


SDPA_FORMULAS = {
    aten._scaled_dot_product_flash_attention_for_cpu: _cpu_sdpa,
    aten._scaled_dot_product_flash_attention_for_cpu_backward: _cpu_sdpa_backward,
}


def flop_counter() -> FlopCounterMode:
    """A silent FlopCounterMode that also counts CPU SDPA; use it for any FLOP count."""
    return FlopCounterMode(display=False, depth=None, custom_mapping=SDPA_FORMULAS)


def count_params(model: nn.Module) -> int:
    """Distinct parameters (a looped or ODE model's shared block counts once)."""
    return sum(p.numel() for p in model.parameters())


def _size(resolution: int | tuple[int, int]) -> tuple[int, int]:
    return (resolution, resolution) if isinstance(resolution, int) else tuple(resolution)


def flops_per_image(model: nn.Module | ModelConfig, resolution: int | tuple[int, int] | None = None) -> int:
    """Forward FLOPs for one image of `resolution` (default: the build size).

    A config is built fresh (on the meta device, no memory or compute, unless its regime
    is `ode`: an adaptive solver's step count depends on the values, so those are run for
    real, initialised with seed 0, on a fixed random image). A model is run as it is, on
    its own device.
    """
    if isinstance(model, ModelConfig):
        device = "cpu" if model.regime == "ode" else "meta"
        with torch.random.fork_rng(devices=[]), torch.device(device):
            torch.manual_seed(0)  # an adaptive solve depends on the weights: make it repeatable
            model = build(model)
    if resolution is None:
        resolution = model.config.image_size if isinstance(model, VisionTransformer) else 224
    param = next(model.parameters())
    in_chans = model.config.in_chans if isinstance(model, VisionTransformer) else 3
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(1, in_chans, *_size(resolution), generator=gen).to(param.device, param.dtype)
    with torch.no_grad(), flop_counter() as counter:
        model(images)
    return int(counter.get_total_flops())


def ode_flops_split(model: VisionTransformer, resolution: int | tuple[int, int]) -> tuple[int, int]:
    """(FLOPs outside the ODE, FLOPs of one vector-field evaluation) for one image.

    An ODE model's cost is `outside + per_eval x NFE`, and NFE changes as an adaptive solver
    meets the trained field: the trainer multiplies by the NFE it measures each epoch, so
    cost fronts use the model as trained, not as initialised. Counted on one real forward.
    """
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(1, model.config.in_chans, *_size(resolution), generator=gen)
    with torch.no_grad(), flop_counter() as counter:
        model(images.to(param.device, param.dtype))
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    root = type(model).__name__
    ode = counts.get(f"{root}.blocks", 0)
    return int(counts.get(root, 0) - ode), int(round(ode / max(model.last_nfe or 1, 1)))


def mixing_flops(mixer: nn.Module, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> int:
    """FLOPs of a mixer's token mixing alone: its forward minus its nn.Linear projections.

    This is the part that scales with the grid (attention: QK^T and AV, ~N^2; SSoG: the
    separable kernels, ~N^1.5), for one image of `grid_hw` tokens plus prefix tokens.
    """
    param = next(mixer.parameters())
    tokens = prefix_tokens + grid_hw[0] * grid_hw[1]
    width = next(m for m in mixer.modules() if isinstance(m, nn.Linear)).in_features
    x = torch.randn(1, tokens, width, device=param.device, dtype=param.dtype)
    with torch.no_grad(), flop_counter() as counter:
        mixer(x, grid_hw)
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    root = type(mixer).__name__
    projections = sum(
        counts.get(f"{root}.{name}", 0)
        for name, m in mixer.named_modules()
        if name and isinstance(m, nn.Linear)
    )
    return int(counts.get(root, 0) - projections)


def _spectral_norm(matrices: Tensor) -> Tensor:
    return torch.linalg.matrix_norm(matrices.double(), ord=2)


@torch.no_grad()
def ssog_head_norm_bounds(mixer: SSoG, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> Tensor:
    """Per head, an upper bound of ||M_h||_2, the token operator (prefix rows included).

    Grid part: D_h = sum_k w_hk A_rows[h,k] ⊗ A_cols[h,k], and ||A ⊗ B|| = ||A||·||B||, so
    ||D_h|| <= sum_k |w_hk|·||A_rows[h,k]||·||A_cols[h,k]|| (triangle inequality; exact
    for K = 1). Each of the P prefix rows is the grid mean of the mixed values,
    (1/N)·1^T D_h z, and (1^T y)^2 <= N·||y||^2 (Cauchy-Schwarz), so
    ||M_h z||^2 = ||D_h z||^2 + P·(1^T D_h z / N)^2 <= (1 + P/N)·||D_h z||^2.
    """
    rows, cols = mixer.kernels(grid_hw)
    grid = mixer.mix.abs().double() * _spectral_norm(rows) * _spectral_norm(cols)  # (heads, K)
    n = grid_hw[0] * grid_hw[1]
    return grid.sum(-1) * math.sqrt(1 + prefix_tokens / n)


@torch.no_grad()
def _ssog_bound(mixer: SSoG, grid_hw: tuple[int, int], prefix_tokens: int) -> float:
    """||W_out||·max_h ||M_h||·||W_v||: the value projection acts on every token alike
    (I ⊗ W_v), mixing acts per channel with its head's M_h (norm: max over heads), the
    output projection again per token; norms of a composition multiply, biases add
    constants. The kernels do not depend on x, so this bounds the mixer itself."""
    heads = ssog_head_norm_bounds(mixer, grid_hw, prefix_tokens)
    w_v, w_out = _spectral_norm(mixer.v.weight), _spectral_norm(mixer.out.weight)
    return float(w_out * heads.max() * w_v)


def lipschitz_bound(
    module: nn.Module, grid_hw: tuple[int, int] | None = None, prefix_tokens: int | None = None
) -> float:
    """Upper bound of the Lipschitz constant (l2 over all tokens and channels) of SSoG mixing.

    `module` is an SSoG mixer, or a model holding some (the max over its mixers is
    returned). grid_hw defaults to the build grid, prefix_tokens to the model's (1: cls).
    Raises TypeError when there is no SSoG mixer (attention has no such bound).
    """
    mixers = [module] if isinstance(module, SSoG) else [m for m in module.modules() if isinstance(m, SSoG)]
    if not mixers:
        raise TypeError(f"{type(module).__name__} holds no SSoG mixer; only SSoG has a Lipschitz bound")
    grid_hw = grid_hw or getattr(module, "build_grid", None) or mixers[0].build_grid
    if prefix_tokens is None:
        prefix_tokens = getattr(module, "num_prefix_tokens", 1)
    bound = max(_ssog_bound(m, tuple(grid_hw), prefix_tokens) for m in mixers)
    return bound if math.isfinite(bound) else float("inf")
