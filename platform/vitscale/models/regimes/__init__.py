"""Regimes: how the blocks are stacked; importing a file registers its class in `REGIMES`.

The regime contract (what `vit.VisionTransformer` relies on):
- constructed as `Regime(config: ModelConfig, make_block: Callable[[], Block])`, calling
  `make_block` once per distinct block it owns;
- `forward(x, grid_hw) -> Tensor` maps tokens (B, T, C) to tokens of the same shape;
- attribute `last_nfe: int | None`: vector-field evaluations of the latest forward (ODE
  regimes), None where the notion does not apply;
- class attributes `default_layer_scale: float` and `default_qk_norm: bool`: the stabilisers
  the regime builds where `model.layer_scale` / `model.qk_norm` are unset (discrete: none,
  so it is the standard ViT; weight-shared regimes: on, so both mixers train).
"""

from vitscale.models.regimes import discrete, looped, ode  # noqa: F401
