"""Token mixers, one file each; importing a file registers its class in `MIXERS`.

The mixer contract (what `vit.Block` and `measure` rely on):
- constructed as `Mixer(config: ModelConfig)`;
- `forward(x, grid_hw) -> Tensor`: x is (B, P + H·W, C) with P >= 0 prefix (cls) tokens
  first and the H x W grid tokens row-major after them; returns the same shape;
- instance attributes `width: int` and `build_grid: tuple[int, int]` (`config.width`,
  `config.grid`): the channels it mixes and the grid it was built for, which `measure` runs it on
  (`mixing_flops`, and `lipschitz_bound` of a mixer called without a grid);
- class attribute `wants_pos_embed: bool`: whether the ViT adds a learned absolute
  position embedding by default (`ModelConfig.pos_embed` overrides it);
- optional class attribute `default_layer_scale: float`: LayerScale the mixer needs where the
  regime builds none (`ModelConfig.resolved_layer_scale`; `model.layer_scale` overrides it);
- optional instance attribute `kernel_cache` (a `models.kernel_cache.KernelCache`): operators
  derived from the mixer's own small parameters, kept between no-grad forwards and checked by
  value once per model forward (`VisionTransformer` opens `kernel_cache_scope` around each one).
A new mixer is one file here plus one import line below.
"""

from vitscale.models.mixers import attention, axial, fourier, linear, pooling, ssog  # noqa: F401
