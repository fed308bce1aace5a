"""ODE regime: one block's residual branches as a vector field, integrated with torchdiffeq.

dx/dt = f(x) with f(x) = a + mlp(norm2(x + a)), a = mixer(norm1(x)) (see `vit.Block`):
autonomous, one shared block, integrated over [0, t_end] (default: depth). Because a
block is x + f(x), euler with step 1 over [0, depth] is exactly the looped model, and
a smaller step or an adaptive solver refines the same continuous-depth model.

The `ode` settings go straight to torchdiffeq 0.2.5: `method`, `rtol`, `atol`, and in
`options` either `step_size` (fixed-grid solvers; default 1.0) or `max_num_steps`
(adaptive solvers; every attempted step counts, rejected ones included). Failures
torchdiffeq reports with assertions become `SolverError` (underflow, too many steps) or
`TrialDiverged` (non-finite state), naming the settings. Function evaluations of each
forward are counted in `last_nfe`.

Step underflow is detected early: torchdiffeq only asserts when t + dt == t in float64,
and before that an adaptive solver asked for tolerances the float32 state cannot meet
creeps on with accepted steps of ~1e-10 (for up to max_num_steps steps, minutes of
compute). An attempted step below eps(state dtype)·t_end — which would need more than
1/eps steps to cross the interval — is therefore reported as an underflow at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

import torch
from torch import Tensor, nn
from torchdiffeq import odeint, odeint_adjoint

from vitscale.errors import SolverError, TrialDiverged
from vitscale.models.config import ModelConfig
from vitscale.models.regimes.ode_settings import FIXED_GRID_SOLVERS, OdeConfig
from vitscale.models.regions import EAGER, bound

SOLVER_FAILURES = ("underflow in dt", "max_num_steps exceeded")


def describe(settings: OdeConfig, t_end: float) -> str:
    """The solver settings in one line, for error messages."""
    parts = [f"solver={settings.solver}", f"t_end={t_end:g}"]
    if settings.solver in FIXED_GRID_SOLVERS:
        parts.append(f"step_size={settings.step_size or 1.0:g}")
    else:
        parts += [
            f"rtol={settings.rtol:g}",
            f"atol={settings.atol:g}",
            f"max_num_steps={settings.max_num_steps}",
        ]
    parts.append(f"adjoint={settings.adjoint}")
    return ", ".join(parts)


@contextmanager
def solver_errors(settings: OdeConfig, t_end: float) -> Iterator[None]:
    """Turn torchdiffeq's failure assertions into typed trial failures.

    Wraps the forward (done here) and, with `adjoint=True`, also `loss.backward()`
    (`NeuralOde.backward_guard`, which the trainer opens): the adjoint solve runs there and can
    fail the same way.
    """
    try:
        yield
    except AssertionError as exc:
        message = str(exc)
        if message.startswith("non-finite values in state"):
            raise TrialDiverged(f"ODE state became non-finite ({describe(settings, t_end)})") from exc
        if not message.startswith(SOLVER_FAILURES):
            raise
        raise SolverError(
            f"ODE solver failed: {message} ({describe(settings, t_end)}); "
            "loosen rtol/atol, raise max_num_steps or use a fixed-grid solver"
        ) from exc


class NeuralOde(nn.Module):
    """x(t_end) of dx/dt = block.residual(x), x(0) = tokens."""

    # An adaptive solver's step count depends on the weights: FLOPs are counted on a real forward.
    flops_depend_on_values = True
    last_nfe: int | None = None  # field evaluations of the latest forward (set by each forward)
    # `vitscale.models.regions.compile_regions` compiles one field evaluation (the block's residual
    # branches); the solver loop and the evaluation counters stay eager, so nothing recompiles per step
    region_setting = EAGER

    def __init__(self, config: ModelConfig, make_block: Callable[[], nn.Module]) -> None:
        super().__init__()
        self.block = make_block()
        self.settings: OdeConfig = config.settings("ode")
        self.t_end = float(self.settings.t_end if self.settings.t_end is not None else config.depth)
        self.last_nfe = None
        self.nfe_count = 0  # every field evaluation so far, adjoint backward solves included

    def solver_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of torchdiffeq.odeint for these settings (nothing added)."""
        s = self.settings
        if s.solver in FIXED_GRID_SOLVERS:
            options = {"step_size": s.step_size if s.step_size is not None else 1.0}
        else:
            options = {"max_num_steps": s.max_num_steps}
        return {"method": s.solver, "rtol": s.rtol, "atol": s.atol, "options": options}

    def forward(self, x: Tensor, grid_hw: tuple[int, int]) -> Tensor:
        return self.solve(x, grid_hw)[-1]

    def forward_flops(self, outside: float, per_eval: float, nfe: float) -> float:
        """Forward FLOPs of one image: `outside` the ODE plus one field evaluation x `nfe`."""
        return outside + per_eval * nfe

    def training_flops(self, outside: int, per_eval: int, forward_nfe: int, backward_nfe: int) -> int:
        """Forward + backward FLOPs of one training image, at the NFE measured on its batch.

        forward  = outside + per_eval x forward_nfe
        backward = 2 x forward                              backprop through the solver's operations
                 = 2 x outside + 3 x per_eval x backward_nfe   adjoint: each backward step evaluates
                                                               the field and its vector-Jacobian
                                                               product (1 + 2 forwards' worth)
        `backward_nfe` is what `nfe_count` grew by during `backward()` (the adjoint solve's own
        evaluations, rejected steps included); without the adjoint it is 0 and unused.
        """
        forward = outside + per_eval * forward_nfe
        if self.settings.adjoint:
            return forward + 2 * outside + 3 * per_eval * backward_nfe
        return 3 * forward

    def backward_guard(self) -> AbstractContextManager[None]:
        """Around `loss.backward()`: with the adjoint method the ODE is solved again there, and
        can fail the same way as the forward solve."""
        if self.settings.adjoint:
            return solver_errors(self.settings, self.t_end)
        return nullcontext()

    def layer_times(self, layers: Sequence[int], depth: int) -> list[float]:
        """t_k = k · t_end / depth: the times at which a depth-`depth` discrete model's block k ends."""
        return [k * self.t_end / depth for k in layers]

    def trajectory(
        self, x: Tensor, grid_hw: tuple[int, int], times: Sequence[float]
    ) -> tuple[Tensor, Tensor]:
        """(x(t_end), x(times) stacked as (len(times), B, T, C)) from ONE solve over [0, t_end].

        The times go into odeint's output grid, so no extra integration happens: fixed-grid
        solvers keep the grid of `step_size` from 0 and return x at a grid point exactly (a time
        between grid points is linearly interpolated between its neighbours); adaptive solvers
        step as they would anyway and read x(t_k) off their dense-output interpolant. NFE is
        that of `forward`. With the adjoint, the states come from the forward solve; the
        backward solve restarts at each t_k (one segment per interval)."""
        inner = sorted({float(t) for t in times if 0.0 < float(t) < self.t_end})
        ys = self.solve(x, grid_hw, inner)
        index = {0.0: 0, **{t: i + 1 for i, t in enumerate(inner)}, self.t_end: len(inner) + 1}
        picked = [ys[index[float(t)]] for t in times]
        return ys[-1], torch.stack(picked) if picked else ys[:0]

    def solve(self, x: Tensor, grid_hw: tuple[int, int], inner: Sequence[float] = ()) -> Tensor:
        """x at [0, *inner, t_end] (inner: increasing times strictly inside the interval)."""
        calls = 0

        adaptive = self.settings.solver not in FIXED_GRID_SOLVERS
        # An adaptive solver's error estimate reads the field: bf16 rounding (~4e-3 relative)
        # would look like local error and inflate the step count, differently per mixer.
        exact = adaptive and self.settings.field_fp32 and torch.is_autocast_enabled(x.device.type)

        residual = bound(self.block, "residual", self.region_setting)

        def field(t: Tensor, y: Tensor) -> Tensor:
            nonlocal calls
            calls += 1
            self.nfe_count += 1
            if exact:
                with torch.autocast(x.device.type, enabled=False):
                    return residual(y.float(), grid_hw).to(y.dtype)
            return residual(y, grid_hw).to(y.dtype)  # autocast may return bf16

        min_step = torch.finfo(x.dtype).eps * self.t_end

        def underflow_guard(t0: Tensor, y0: Tensor, dt: Tensor) -> None:
            step = abs(float(dt.detach()))
            if adaptive and step < min_step:
                if not torch.isfinite(y0).all():  # a NaN state makes the step NaN -> 0
                    raise TrialDiverged(
                        f"ODE state became non-finite ({describe(self.settings, self.t_end)})"
                    )
                raise SolverError(
                    f"ODE solver failed: underflow in dt {step:.3g} at t={float(t0):.4g} "
                    f"(below eps·t_end = {min_step:.3g}) ({describe(self.settings, self.t_end)}); "
                    "loosen rtol/atol or use a fixed-grid solver"
                )

        field.callback_step = underflow_guard  # type: ignore[attr-defined]
        field.callback_step_adjoint = underflow_guard  # type: ignore[attr-defined]
        time_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        t = torch.tensor([0.0, *inner, self.t_end], dtype=time_dtype, device=x.device)
        with solver_errors(self.settings, self.t_end):
            if self.settings.adjoint:
                params = tuple(p for p in self.block.parameters() if p.requires_grad)
                ys = odeint_adjoint(field, x, t, adjoint_params=params, **self.solver_kwargs())
            else:
                ys = odeint(field, x, t, **self.solver_kwargs())
        self.last_nfe = calls
        return ys

    def extra_repr(self) -> str:
        return describe(self.settings, self.t_end)
