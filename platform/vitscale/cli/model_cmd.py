"""`vitscale model info`, and the model flags every command that builds a model shares.

Reuse the flags with the `model_options` decorator (e.g. in `vitscale train`):

    @app.command()
    @model_options
    def train(model_overrides: dict, epochs: int = 10) -> None:
        config = model_config(model_overrides, base=spec_model_dict)

The command receives only the flags the user gave, nested like ModelConfig
(`{"width": 192, "ode": {"rtol": 1e-4}}`); validation errors name the field.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

import torch
import typer
from rich.console import Console
from rich.table import Table

from vitscale.cli.app import model_app
from vitscale.models import ModelConfig, build, count_params, flops_per_image, lipschitz_bound
from vitscale.models.mixers.ssog import SSoG


@dataclass(frozen=True)
class ModelFlag:
    """One command-line flag that sets one ModelConfig field (dotted path)."""

    field: str
    type: Any
    decls: tuple[str, ...]
    help: str

    @property
    def param(self) -> str:
        return "model_" + self.field.replace(".", "_")


MODEL_FLAGS: tuple[ModelFlag, ...] = (
    ModelFlag("mixer", str, ("--mixer",), "token mixer: attention | ssog"),
    ModelFlag("regime", str, ("--regime",), "block stacking: discrete | looped | ode"),
    ModelFlag("width", int, ("--width",), "embedding dimension"),
    ModelFlag("depth", int, ("--depth",), "blocks (discrete), applications (looped), default t_end (ode)"),
    ModelFlag("heads", int, ("--heads",), "heads (must divide width)"),
    ModelFlag("patch_size", int, ("--patch-size",), "patch side in pixels"),
    ModelFlag("num_classes", int, ("--num-classes",), "classes of the head"),
    ModelFlag("in_chans", int, ("--in-chans",), "image channels"),
    ModelFlag("mlp_ratio", float, ("--mlp-ratio",), "MLP hidden width / width"),
    ModelFlag("num_gaussians", int, ("--num-gaussians",), "SSoG: Gaussians per head and axis"),
    ModelFlag("ssog_offsets", bool, ("--ssog-offsets/--no-ssog-offsets",), "SSoG: learn centre offsets"),
    ModelFlag(
        "pos_embed", bool, ("--pos-embed/--no-pos-embed",), "learned position embedding (default: mixer's)"
    ),
    ModelFlag("attention_backend", str, ("--attention-backend",), "attention: sdpa | math"),
    ModelFlag(
        "layer_scale", float, ("--layer-scale",), "LayerScale initial gain; 0 = off (default: regime's)"
    ),
    ModelFlag("qk_norm", bool, ("--qk-norm/--no-qk-norm",), "attention: QK-norm (default: regime's)"),
    ModelFlag(
        "ode.solver", str, ("--ode-solver",), "dopri5 | bosh3 | adaptive_heun | rk4 | midpoint | euler"
    ),
    ModelFlag("ode.rtol", float, ("--ode-rtol",), "relative tolerance (adaptive solvers)"),
    ModelFlag("ode.atol", float, ("--ode-atol",), "absolute tolerance (adaptive solvers)"),
    ModelFlag("ode.step_size", float, ("--ode-step-size",), "step of fixed-grid solvers (default 1)"),
    ModelFlag("ode.t_end", float, ("--ode-t-end",), "integrate over [0, t_end] (default: depth)"),
    ModelFlag(
        "ode.adjoint", bool, ("--ode-adjoint/--no-ode-adjoint",), "backpropagate with the adjoint method"
    ),
    ModelFlag(
        "ode.max_num_steps", int, ("--ode-max-num-steps",), "adaptive solvers give up after this many steps"
    ),
    ModelFlag(
        "ode.field_fp32",
        bool,
        ("--ode-field-fp32/--no-ode-field-fp32",),
        "adaptive solvers: field in float32 under autocast",
    ),
)


def _default(field: str) -> Any:
    """The ModelConfig default of a dotted field (None where it is computed)."""
    model: Any = ModelConfig
    *parents, leaf = field.split(".")
    for part in parents:
        model = model.model_fields[part].annotation
    return model.model_fields[leaf].default


def _flag_parameter(flag: ModelFlag) -> inspect.Parameter:
    default = _default(flag.field)
    shown = f" (default: {default})" if default is not None else ""
    option = typer.Option(*flag.decls, help=flag.help + shown, rich_help_panel="Model")
    return inspect.Parameter(
        flag.param,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[flag.type | None, option],
    )


def model_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """Add every model flag to a Typer command; it receives `model_overrides: dict` instead."""
    signature = inspect.signature(func, eval_str=True)
    own = [p for name, p in signature.parameters.items() if name != "model_overrides"]
    flags = [_flag_parameter(f) for f in MODEL_FLAGS]
    params = sorted(own, key=lambda p: p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD) + flags
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in params]

    def command(**kwargs: Any) -> Any:
        overrides: dict[str, Any] = {}
        for flag in MODEL_FLAGS:
            value = kwargs.pop(flag.param)
            if value is not None:
                *parents, leaf = flag.field.split(".")
                target = overrides
                for part in parents:
                    target = target.setdefault(part, {})
                target[leaf] = value
        return func(model_overrides=overrides, **kwargs)

    command.__name__, command.__doc__ = func.__name__, func.__doc__
    command.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def model_config(overrides: dict[str, Any], base: dict[str, Any] | None = None) -> ModelConfig:
    """`base` (e.g. a spec's model block) with the flags given on the command line on top."""
    merged = dict(base or {})
    for key, value in overrides.items():
        merged[key] = {**(merged.get(key) or {}), **value} if isinstance(value, dict) else value
    return ModelConfig.model_validate(merged)


def describe_model(config: ModelConfig) -> tuple[dict[str, Any], int | None]:
    """({tokens, params, flops_per_image, lipschitz_bound (ssog; else None), no_weight_decay
    (parameter names AdamW leaves undecayed), config}, ODE NFE).

    Weights are initialised with seed 0 (the bound and an adaptive ODE's FLOPs depend on
    them); FLOPs of non-ODE models are counted on the meta device.
    """
    torch.manual_seed(0)
    model = build(config)
    has_bound = any(isinstance(m, SSoG) for m in model.modules())
    flops = flops_per_image(model if config.regime == "ode" else config)
    return {
        "tokens": config.grid[0] * config.grid[1],
        "params": count_params(model),
        "flops_per_image": flops,
        "lipschitz_bound": lipschitz_bound(model) if has_bound else None,
        "no_weight_decay": sorted(model.no_weight_decay()),
        "config": config.model_dump(mode="json"),
    }, model.last_nfe


@model_app.command("info")
@model_options
def info(
    model_overrides: dict,
    resolution: Annotated[
        list[int] | None,
        typer.Option("--resolution", "-r", help="image side; repeat for several (default: 224)"),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="print a JSON list instead of a table")] = False,
) -> None:
    """Tokens, parameters, forward FLOPs per image and (SSoG) the mixing Lipschitz bound."""
    described = [
        describe_model(model_config({**model_overrides, "image_size": r})) for r in resolution or [224]
    ]
    rows = [row for row, _ in described]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cfg = ModelConfig.model_validate(rows[0]["config"])
    title = f"{cfg.mixer} x {cfg.regime}: width {cfg.width}, depth {cfg.depth}, heads {cfg.heads}, patch {cfg.patch_size}"
    table = Table(title=title)
    for column in ("resolution", "tokens", "params", "GFLOPs/image", "lipschitz_bound"):
        table.add_column(column, justify="right")
    for row, n in described:
        bound = "-" if row["lipschitz_bound"] is None else f"{row['lipschitz_bound']:.4g}"
        gflops = f"{row['flops_per_image'] / 1e9:.3f}" + (f" ({n} NFE)" if n is not None else "")
        table.add_row(
            str(row["config"]["image_size"]), str(row["tokens"]), f"{row['params']:,}", gflops, bound
        )
    Console().print(table)
