"""Regimes: how the blocks are stacked; importing a file registers its class in `REGIMES`.

The regime contract (what `vit.VisionTransformer` relies on):
- constructed as `Regime(config: ModelConfig, make_block: Callable[[], Block])`, calling
  `make_block` once per distinct block it owns;
- `forward(x, grid_hw) -> Tensor` maps tokens (B, T, C) to tokens of the same shape;
- attribute `last_nfe: int | None`: vector-field evaluations of the latest forward (ODE
  regimes), None where the notion does not apply;
- `forward_flops(outside, unit, nfe)` and `training_flops(outside, unit, forward_nfe,
  backward_nfe)`: FLOPs of one image's forward, and of one training image's forward + backward,
  from `measure.regime_flops_split` (FLOPs outside the regime; FLOPs of its unit: the whole
  stack, or one field evaluation where the regime counts NFE) and the NFE measured (the
  trainer asks these, so it names no regime);
- `backward_guard()`: the context manager the trainer opens around `loss.backward()` (ODE with
  the adjoint: the backward solve's failures become trial failures; others: a nullcontext);
- class attribute `flops_depend_on_values: bool`: whether FLOPs must be counted on a real
  forward with real weights (an adaptive solver's step count) rather than on the meta device;
- class attribute `default_layer_scale: float`: the LayerScale the regime builds where
  `model.layer_scale` is unset (discrete: none, so it is the standard ViT; weight-shared
  regimes: on). It acts on every mixer alike; a regime never switches on a stabiliser that
  only one mixer has (QK-norm is attention's own knob, searched inside its arm).
"""

from vitscale.models.regimes import discrete, looped, ode  # noqa: F401
