"""What a model costs and how smooth its mixers are: params, FLOPs, Lipschitz bounds.

FLOPs are counted by torch.utils.flop_counter.FlopCounterMode on a real forward (matmul
family only: the convention of ViT FLOP tables; one multiply-add = 2 FLOPs). On CPU,
F.scaled_dot_product_attention dispatches to an op FlopCounterMode does not know (it
would count 0), so that op gets the standard SDPA formula here.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode, sdpa_backward_flop_count, sdpa_flop_count

from vitscale.models import regions
from vitscale.models.config import ModelConfig
from vitscale.models.kernel_cache import KernelCache
from vitscale.models.registry import MIXERS, REGIMES
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
# Ops FlopCounterMode does not know, with their counts; a mixer file adds its own (FFTs).
FLOP_FORMULAS: dict = dict(SDPA_FORMULAS)


def register_flops(op, formula) -> None:
    """Count `op` (an aten overload packet, e.g. torch.ops.aten.avg_pool2d) with `formula(*shapes, out_shape=..., **kw) -> int`."""
    FLOP_FORMULAS[op] = formula


def flop_counter() -> FlopCounterMode:
    """A silent FlopCounterMode that also counts CPU SDPA and registered ops; use it for any count."""
    return FlopCounterMode(display=False, depth=None, custom_mapping=FLOP_FORMULAS)


def count_params(model: nn.Module) -> int:
    """Distinct parameters (a weight-shared regime's block counts once)."""
    return sum(p.numel() for p in model.parameters())


def _size(resolution: int | tuple[int, int]) -> tuple[int, int]:
    return (resolution, resolution) if isinstance(resolution, int) else tuple(resolution)


def flops_per_image(model: nn.Module | ModelConfig, resolution: int | tuple[int, int] | None = None) -> int:
    """Forward FLOPs for one image of `resolution` (default: the build size).

    A config is built fresh (on the meta device, no memory or compute, unless its regime's
    cost depends on the weights, `flops_depend_on_values`: an adaptive solver's step count
    does, so those are run for real, initialised with seed 0, on a fixed random image). A model
    is run as it is, on its own device.
    """
    if isinstance(model, ModelConfig):
        device = "cpu" if REGIMES[model.regime].flops_depend_on_values else "meta"
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


def regime_flops_split(model: VisionTransformer, resolution: int | tuple[int, int]) -> tuple[int, int]:
    """(FLOPs outside the regime, FLOPs of one regime unit) for one image, on one real forward.

    The unit is one vector-field evaluation where the regime counts them (the regime's FLOPs /
    last_nfe) and the whole stack where it does not (last_nfe None). Such a model's cost is
    `outside + per_eval x NFE`, and NFE changes as an adaptive solver meets the trained field:
    the trainer multiplies by the NFE it measures, so cost fronts use the model as trained, not
    as initialised; the regime's `forward_flops` / `training_flops` do the sum.
    """
    param = next(model.parameters())
    gen = torch.Generator().manual_seed(0)
    images = torch.randn(1, model.config.in_chans, *_size(resolution), generator=gen)
    with torch.no_grad(), regions.eager(model), flop_counter() as counter:  # compiled graphs hide aten ops
        model(images.to(param.device, param.dtype))
    counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
    root = type(model).__name__
    inside = counts.get(f"{root}.blocks", 0)
    return int(counts.get(root, 0) - inside), int(round(inside / max(model.last_nfe or 1, 1)))


def mixing_flops(mixer: nn.Module, grid_hw: tuple[int, int], prefix_tokens: int = 1) -> int:
    """FLOPs of a mixer's token mixing alone: its forward minus its nn.Linear projections.

    This is the part that scales with the grid (attention: QK^T and AV, ~N^2; SSoG: the
    separable kernels, ~N^1.5), for one image of `grid_hw` tokens plus prefix tokens.
    """
    param = next(mixer.parameters(), None)  # parameter-free mixers: counted on the meta device
    device, dtype = (param.device, param.dtype) if param is not None else ("meta", torch.float32)
    tokens = prefix_tokens + grid_hw[0] * grid_hw[1]
    x = torch.randn(1, tokens, mixer.width, device=device, dtype=dtype)
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


def _bounded(module: nn.Module) -> list[nn.Module]:
    """The mixers in `module` (or itself) that state a Lipschitz bound (`lipschitz_bound` method)."""
    if not isinstance(module, VisionTransformer) and callable(getattr(module, "lipschitz_bound", None)):
        return [module]
    return [m for m in module.modules() if m is not module and callable(getattr(m, "lipschitz_bound", None))]


def has_lipschitz_bound(module: nn.Module) -> bool:
    """Whether `module` is, or holds, a mixer with a closed-form Lipschitz bound."""
    return bool(_bounded(module))


def lipschitz_bound(
    module: nn.Module, grid_hw: tuple[int, int] | None = None, prefix_tokens: int | None = None
) -> float:
    """Upper bound of the Lipschitz constant (l2 over all tokens and channels) of token mixing.

    `module` is a mixer that states one (`lipschitz_bound(grid_hw, prefix_tokens)`: SSoG, and the
    linear mixers, whose operator norm is exact), or a model holding some (the max over its mixers
    is returned). grid_hw defaults to the build grid, prefix_tokens to the model's (1: cls).
    Raises TypeError when there is none (attention: no closed form).
    """
    mixers = _bounded(module)
    if not mixers:
        raise TypeError(f"{type(module).__name__} holds no mixer with a Lipschitz bound")
    grid_hw = grid_hw or module.build_grid  # a model's, or a mixer's own (the mixer contract)
    if prefix_tokens is None:
        prefix_tokens = module.num_prefix_tokens if isinstance(module, VisionTransformer) else 1
    bound = max(float(m.lipschitz_bound(tuple(grid_hw), prefix_tokens)) for m in mixers)
    return bound if math.isfinite(bound) else float("inf")


@contextmanager
def one_thread() -> Iterator[None]:
    """Torch on one thread for the duration. Describing a model is many small ops (the seed-0
    initialisation, a few 768 x 768 SVDs): on two cores, two threads spent 1.8 s of CPU on the
    ViT-B build and 46 s on its SSoG bound, one thread 0.8 s and 1.9 s (issue 30)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def needs_values(config: ModelConfig) -> bool:
    """Whether describing `config` reads weights: its regime's FLOPs do (an adaptive solver's step
    count), or its mixer states a Lipschitz bound (SSoG's reads its projections)."""
    mixer = MIXERS[config.mixer]
    return bool(REGIMES[config.regime].flops_depend_on_values) or callable(
        getattr(mixer, "lipschitz_bound", None)
    )


def forget_kept_kernels(module: nn.Module) -> None:
    """Empty the kernel caches (`models.kernel_cache`) of `module` and its children: on the meta
    device an entry cannot be compared with the parameters by value."""
    for m in module.modules():
        if isinstance(cache := vars(m).get("kernel_cache"), KernelCache):
            cache.clear()


def describe_model(config: ModelConfig) -> tuple[dict[str, Any], int | None]:
    """({tokens, params, flops_per_image, mixing_flops (one mixer, one image), lipschitz_bound
    (mixers with a closed form; else None), no_weight_decay (parameter names AdamW leaves
    undecayed), lr_scale (parameter name -> learning-rate multiplier, where not 1), config (with
    the mixer's and regime's choices resolved: pos_embed, layer_scale)}, the forward's NFE).

    One model is built, on one thread. Where something reads the weights (`needs_values`) it gets
    seed-0 weights: the bound reads them, and FLOPs that depend on them are counted on a real
    forward of one image. Then (or from the start, where nothing reads them) it lives on the meta
    device, where the other counts cost the same at any resolution and nothing is initialised.
    Every count equals that of a real forward (tests/models/test_describe.py).
    """
    torch.manual_seed(0)
    with one_thread():
        if needs_values(config):
            model = build(config)
        else:
            with torch.device("meta"):
                model = build(config)
        bound = lipschitz_bound(model) if has_lipschitz_bound(model) else None
        flops = flops_per_image(model) if REGIMES[config.regime].flops_depend_on_values else None
        nfe = model.last_nfe
        model.to("meta")  # a no-op for a meta model; what follows reads shapes only
        forget_kept_kernels(model)
        if flops is None:
            flops = flops_per_image(model)
        mixer = next(m for m in model.modules() if isinstance(m, MIXERS[config.mixer]))
        forget_kept_kernels(mixer)
        return {
            "tokens": config.grid[0] * config.grid[1],
            "params": count_params(model),
            "flops_per_image": flops,
            "mixing_flops": mixing_flops(mixer, config.grid),
            "lipschitz_bound": bound,
            "no_weight_decay": sorted(model.no_weight_decay()),
            "lr_scale": dict(sorted(model.lr_scales().items())),
            "config": config.resolved().model_dump(mode="json"),
        }, nfe
