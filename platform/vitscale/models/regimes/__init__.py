"""Regimes: how the blocks are stacked; importing a file registers its class in `REGIMES`.

The regime contract (what `vit.VisionTransformer` relies on):
- constructed as `Regime(config: ModelConfig, make_block: Callable[[], Block])`, calling
  `make_block` once per distinct block it owns;
- `forward(x, grid_hw) -> Tensor` maps tokens (B, T, C) to tokens of the same shape;
- attribute `last_nfe: int | None`: vector-field evaluations of the latest forward (ODE
  regimes), None where the notion does not apply;
- class attribute `default_layer_scale: float`: the LayerScale the regime builds where
  `model.layer_scale` is unset (discrete: none, so it is the standard ViT; weight-shared
  regimes: on). It acts on every mixer alike; a regime never switches on a stabiliser that
  only one mixer has (QK-norm is attention's own knob, searched inside its arm).
"""

from vitscale.models.regimes import discrete, looped, ode  # noqa: F401
