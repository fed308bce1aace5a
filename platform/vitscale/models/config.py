"""`ModelConfig`: the architecture of one model (mixer x regime x size).

Reused verbatim by the study spec (`trial.model`), so every field here is searchable.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

ODE_SOLVERS = ("dopri5", "bosh3", "adaptive_heun", "rk4", "midpoint", "euler")
FIXED_GRID_SOLVERS = ("rk4", "midpoint", "euler")


class OdeConfig(BaseModel):
    """Settings passed straight through to torchdiffeq.odeint."""

    model_config = ConfigDict(extra="forbid")

    solver: Literal["dopri5", "bosh3", "adaptive_heun", "rk4", "midpoint", "euler"] = "dopri5"
    rtol: float = Field(1e-3, gt=0, description="relative tolerance (adaptive solvers)")
    atol: float = Field(1e-4, gt=0, description="absolute tolerance (adaptive solvers)")
    step_size: float | None = Field(
        None, gt=0, description="step of fixed-grid solvers; default 1.0 (one step per unit time)"
    )
    t_end: float | None = Field(None, gt=0, description="integrate over [0, t_end]; default: depth")
    adjoint: bool = Field(False, description="backpropagate with the adjoint method (O(1) memory)")
    max_num_steps: int = Field(1000, ge=1, description="adaptive solvers give up after this many steps")
    field_fp32: bool = Field(
        True,
        description="adaptive solvers evaluate the vector field in float32 even under bf16 autocast "
        "(their error estimate reads it; bf16 rounding would inflate NFE)",
    )


class ModelConfig(BaseModel):
    """One ViT: patch embedding, `depth` blocks of (mixer, MLP) stacked by `regime`, a head."""

    model_config = ConfigDict(extra="forbid")

    mixer: str = Field("attention", description="token mixer: attention | ssog (see vitscale.models.MIXERS)")
    regime: str = Field("discrete", description="block stacking: discrete | looped | ode")
    width: int = Field(64, ge=1, description="embedding dimension")
    depth: int = Field(4, ge=1, description="blocks (discrete), applications (looped), default t_end (ode)")
    heads: int = Field(4, ge=1)
    mlp_ratio: float = Field(4.0, gt=0)
    patch_size: int = Field(4, ge=1)
    in_chans: int = Field(3, ge=1, description="set from the data set in a trial")
    num_classes: int = Field(10, ge=2, description="set from the data set in a trial")
    image_size: int = Field(32, ge=1, description="build resolution; set from data.resolution in a trial")
    num_gaussians: int = Field(4, ge=1, description="SSoG: Gaussians per head and axis")
    ssog_offsets: bool = Field(True, description="SSoG: learn Gaussian centre offsets")
    pos_embed: bool | None = Field(
        None,
        description="learned absolute position embedding; default: the mixer's choice "
        "(attention: yes, as in ViT; ssog: no, its kernels already see relative position)",
    )
    layer_scale: float | None = Field(
        None,
        ge=0,
        description="LayerScale (CaiT): initial value of a learned per-channel gain on each residual "
        "branch; 0 = off; default: the regime's choice (discrete: off, the standard ViT; looped, ode: on)",
    )
    qk_norm: bool | None = Field(
        None,
        description="attention: LayerNorm on queries and keys per head; "
        "default: the regime's choice (discrete: off; looped, ode: on)",
    )
    attention_backend: Literal["sdpa", "math"] = Field(
        "sdpa", description="attention: fused F.scaled_dot_product_attention or explicit N x N weights"
    )
    ode: OdeConfig = Field(default_factory=OdeConfig)

    @model_validator(mode="after")
    def _check_shapes(self) -> ModelConfig:
        from vitscale.models.registry import MIXERS, REGIMES

        if self.mixer not in MIXERS:
            raise ValueError(f"mixer: unknown mixer {self.mixer!r}; choose one of {sorted(MIXERS)}")
        if self.regime not in REGIMES:
            raise ValueError(f"regime: unknown regime {self.regime!r}; choose one of {sorted(REGIMES)}")
        if self.width % self.heads:
            raise ValueError(f"heads: {self.heads} does not divide width {self.width}")
        if self.image_size % self.patch_size:
            raise ValueError(
                f"image_size: {self.image_size} is not divisible by patch_size {self.patch_size}"
            )
        return self

    @property
    def resolved_layer_scale(self) -> float:
        """LayerScale's initial value as built (0.0 = off)."""
        from vitscale.models.registry import REGIMES

        value = self.layer_scale if self.layer_scale is not None else REGIMES[self.regime].default_layer_scale
        return float(value)

    @property
    def resolved_qk_norm(self) -> bool:
        """Whether attention normalises queries and keys, as built."""
        from vitscale.models.registry import REGIMES

        return bool(self.qk_norm if self.qk_norm is not None else REGIMES[self.regime].default_qk_norm)

    @property
    def grid(self) -> tuple[int, int]:
        side = self.image_size // self.patch_size
        return side, side
