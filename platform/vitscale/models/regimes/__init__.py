"""Regimes: how the blocks are stacked. One file each for the class (torch), a `<name>_settings.py`
where it has settings, and one declaration below that registers them in `REGIMES`; the class is
imported when a model first builds it.

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
- declared with it (read without importing the class; `models.facts.RegimeFacts`):
  `default_layer_scale: float`, the LayerScale the regime builds where `model.layer_scale` is
  unset (discrete: none, so it is the standard ViT; weight-shared regimes: on). It acts on every
  mixer alike; a regime never switches on a stabiliser that only one mixer has (QK-norm is
  attention's own knob, searched inside its arm).
- optionally declared: `check_config(config)`, a rule spanning its settings and the core fields,
  and what benchmarks and the analysis read: `counts_nfe` (its forward takes a measured number of
  field evaluations), `marker` / `line` (figures), `axes` (study axes its settings span),
  `bench_settings` (its section of the model `vitscale bench` measures by default), `benched`.
The class is checked against `models.protocols.Regime` when first imported.
"""

from vitscale.models.facts import SearchAxis
from vitscale.models.regimes import ode_settings
from vitscale.models.registry import declare_regime

_HERE = __name__  # "vitscale.models.regimes": where each class is imported from when first built

declare_regime(  # the standard ViT
    "discrete", f"{_HERE}.discrete:Discrete", default_layer_scale=0.0, marker="o", line="-", benched=True
)
declare_regime(
    "looped", f"{_HERE}.looped:Looped", default_layer_scale=0.1, marker="s", line="--", benched=True
)
declare_regime(
    "ode",
    f"{_HERE}.ode:NeuralOde",
    ode_settings.OdeConfig,
    default_layer_scale=0.1,
    check_config=ode_settings.check_config,
    counts_nfe=True,
    marker="^",
    line=":",
    axes=(
        SearchAxis(
            "tolerance",
            "Test error and NFE vs ODE solver tolerance",
            "solver tolerance",
            ("rtol", "atol"),
            trend="log_linear_decade",
            cost="nfe",
            x_names={"rtol": "relative tolerance (rtol)", "atol": "absolute tolerance (atol)"},
            unless={"solver": ode_settings.FIXED_GRID_SOLVERS},  # a fixed grid ignores rtol and atol
        ),
    ),
    # a benchmark's ODE: rk4 with step 1, a fixed grid, so every mixer does the same 4·depth field
    # evaluations whatever its weights and dtype (an adaptive solver's NFE depends on both)
    bench_settings={"solver": "rk4", "step_size": 1.0},
    benched=True,
)
