"""`model.ode`: the ODE regime's solver settings, passed straight to torchdiffeq, and the rule they
must meet (its class: ode.py)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vitscale.models.config import ModelConfig

FIXED_GRID_SOLVERS = ("rk4", "midpoint", "euler")


class OdeConfig(BaseModel):
    """`model.ode`: settings passed straight through to torchdiffeq.odeint."""

    model_config = ConfigDict(extra="forbid")

    solver: Literal["dopri5", "bosh3", "adaptive_heun", "rk4", "midpoint", "euler"] = "dopri5"
    rtol: float = Field(1e-3, gt=0, description="relative tolerance (adaptive solvers)")
    atol: float = Field(1e-4, gt=0, description="absolute tolerance (adaptive solvers)")
    step_size: float | None = Field(
        None, gt=0, description="step of fixed-grid solvers; default 1.0 (one step per unit time)"
    )
    t_end: float | None = Field(None, gt=0, description="integrate over [0, t_end]; default: depth")
    adjoint: bool = Field(False, description="backpropagate with the adjoint method (O(1) memory)")
    max_num_steps: int = Field(
        1000,
        ge=1,
        description="most steps of one solve: adaptive solvers give up after it, fixed-grid ones "
        "(t_end / step_size) must fit in it",
    )
    field_fp32: bool = Field(
        True,
        description="adaptive solvers evaluate the vector field in float32 even under bf16 autocast "
        "(their error estimate reads it; bf16 rounding would inflate NFE)",
    )


def check_config(config: ModelConfig) -> None:
    """A fixed-grid solve of more than max_num_steps steps (`--ode-step-size 1e-6`: 4 million
    per forward) would run for days: refused when the config is validated, like any bad value."""
    s: OdeConfig = config.settings("ode")
    if s.solver not in FIXED_GRID_SOLVERS:
        return
    t_end = s.t_end if s.t_end is not None else config.depth
    step = s.step_size if s.step_size is not None else 1.0
    if t_end / step > s.max_num_steps:
        raise ValueError(
            f"ode.step_size: {step:g} over t_end {t_end:g} is {t_end / step:,.0f} {s.solver} steps per "
            f"forward, more than ode.max_num_steps {s.max_num_steps}; take a larger step or raise "
            "max_num_steps"
        )
