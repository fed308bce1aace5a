"""Token mixers: one file each for the class (torch), one `<name>_settings.py` for its settings
(pydantic only), and one declaration below that registers both in `MIXERS`. The class is imported
when a model first builds it, so validating a config or printing `--help` never imports torch.

The mixer contract (what `vit.Block` and `measure` rely on):
- constructed as `Mixer(config: ModelConfig)`;
- `forward(x, grid_hw) -> Tensor`: x is (B, P + H·W, C) with P >= 0 prefix (cls) tokens
  first and the H x W grid tokens row-major after them; returns the same shape;
- instance attributes `width: int` and `build_grid: tuple[int, int]` (`config.width`,
  `config.grid`): the channels it mixes and the grid it was built for, which `measure` runs it on
  (`mixing_flops`, and `lipschitz_bound` of a mixer called without a grid);
- declared with it (read without importing the class; `models.facts.MixerFacts`): `wants_pos_embed:
  bool`, whether the ViT adds a learned absolute position embedding by default
  (`ModelConfig.pos_embed` overrides it); optionally `default_layer_scale: float`, the LayerScale
  the mixer needs where the regime builds none (`ModelConfig.resolved_layer_scale`;
  `model.layer_scale` overrides it), `check_config(config)`, a rule spanning its settings and the
  core fields (`ValueError`), and what benchmarks and the analysis read: `color` (its colour in
  every figure), `axes` (study axes its settings span: `SearchAxis`), `backend` (a setting that
  picks an implementation of the same function: `Backend`), `benched` (measured by `vitscale
  bench` by default);
- optional instance attribute `kernel_cache` (a `models.kernel_cache.KernelCache`): operators
  derived from the mixer's own small parameters, kept between no-grad forwards and checked by
  value once per model forward (`VisionTransformer` opens `kernel_cache_scope` around each one).
The class is checked against `models.protocols.Mixer` when first imported.
A new mixer is its two files here plus one declaration below (registration order is the
order of sections, flags and columns).
"""

from vitscale.models.facts import Backend, SearchAxis
from vitscale.models.mixers import (
    attention_settings,
    axial_settings,
    fourier_settings,
    linear_settings,
    pooling_settings,
    ssog_settings,
)
from vitscale.models.registry import declare_mixer

_HERE = __name__  # "vitscale.models.mixers": where each class is imported from when first built

# permutation-equivariant: it needs absolute positions; measured once per backend (sdpa: the fused
# kernel, math: explicit N x N weights; auto runs sdpa at a benchmark's float32 or on CUDA)
declare_mixer(
    "attention",
    f"{_HERE}.attention:Attention",
    attention_settings.AttentionSettings,
    wants_pos_embed=True,
    color="#1f77b4",
    backend=Backend("backend", lines={"sdpa": "-", "math": "--"}, measured_as={"auto": "sdpa"}),
    benched=True,
)
# equivariant to permutations within a row/column: needs positions
declare_mixer("axial", f"{_HERE}.axial:AxialAttention", axial_settings.AxialSettings, wants_pos_embed=True)
# as FNet
declare_mixer("fourier", f"{_HERE}.fourier:Fourier", fourier_settings.FourierSettings, wants_pos_embed=True)
# permutation-equivariant like softmax attention; LayerScale where the regime builds none (see linear.py)
declare_mixer(
    "linear",
    f"{_HERE}.linear:LinearAttention",
    linear_settings.LinearSettings,
    wants_pos_embed=True,
    default_layer_scale=0.1,
)
# PoolFormer has none; set model.pos_embed to add one. Benchmarked by default: mixing almost free,
# its speed-up over attention is the ceiling of any mixer on that machine
declare_mixer(
    "pooling",
    f"{_HERE}.pooling:Pooling",
    pooling_settings.PoolingSettings,
    wants_pos_embed=False,
    benched=True,
)
# the kernels are functions of relative position already
declare_mixer(
    "ssog",
    f"{_HERE}.ssog:SSoG",
    ssog_settings.SSoGSettings,
    wants_pos_embed=False,
    check_config=ssog_settings.check_config,
    color="#d62728",
    axes=(
        SearchAxis(
            "num_gaussians",
            "Test error vs number of Gaussians (SSoG)",
            "Gaussians per head and axis (K)",
            ("num_gaussians",),
        ),
    ),
    benched=True,
)
