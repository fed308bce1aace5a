"""`vitscale model info`, and the model flags every command that builds a model shares.

Reuse the flags with the `model_options` decorator (e.g. in `vitscale train`):

    @app.command()
    @model_options
    def train(model_overrides: dict, epochs: int = 10) -> None:
        config = model_config(model_overrides, base=spec_model_dict)

The flags are generated from ModelConfig and the settings every registered mixer and regime
declares (`--ssog-num-gaussians`, `--attention-backend`, `--ode-rtol`), descriptions included,
when the CLI is built. The command receives only the flags the user gave, nested like
ModelConfig (`{"width": 192, "ode": {"rtol": 1e-4}}`); validation errors name the field.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any, Literal, get_args, get_origin

import typer
from rich.table import Table

from vitscale import models  # models.describe_model imports torch when first read
from vitscale.cli.app import model_app
from vitscale.cli.console import stdout_console
from vitscale.dotted import nested
from vitscale.models import ModelConfig
from vitscale.models.registry import MIXERS, REGIMES
from vitscale.validation import unwrap_optional

NOT_FLAGS = ("image_size",)  # set by --resolution / the data set
FLAG_TYPES = (bool, int, float, str)


@dataclass(frozen=True)
class ModelFlag:
    """One command-line flag that sets one ModelConfig field (dotted path), derived from the config."""

    field: str
    type: Any
    decls: tuple[str, ...]
    help: str
    default: Any = None

    @property
    def param(self) -> str:
        return "model_" + self.field.replace(".", "_")


def _flag(path: str, info: Any) -> ModelFlag | None:
    """The flag of one leaf field: its type, `--path-with-dashes` (bools: --x/--no-x), its description."""
    ann = unwrap_optional(info.annotation)
    choices = get_args(ann) if get_origin(ann) is Literal else None
    kind = str if choices else ann
    if kind not in FLAG_TYPES:
        return None  # lists, nested types: set them in a study file
    name = "--" + path.replace(".", "-").replace("_", "-")
    decls = (f"{name}/--no-{name[2:]}",) if kind is bool else (name,)
    text = info.description or path.rsplit(".", 1)[-1].replace("_", " ")
    if path in ("mixer", "regime"):  # registered names, including plugins registered later
        choices = tuple(sorted(MIXERS if path == "mixer" else REGIMES))
    if choices:
        text += f" ({' | '.join(map(str, choices))})"
    if path.count(".") == 1 and path.split(".")[0] in MIXERS:
        text = f"{path.split('.')[0]}: {text}"
    return ModelFlag(path, kind, decls, text, info.get_default(call_default_factory=True))


def model_flags(exclude: Iterable[str] = ()) -> tuple[ModelFlag, ...]:
    """Every flag ModelConfig's fields (and the registered sections' fields) give, in declaration order."""
    flags = (_flag(path, info) for path, info in ModelConfig.leaves() if path not in (*NOT_FLAGS, *exclude))
    return tuple(f for f in flags if f is not None)


def _flag_parameter(flag: ModelFlag) -> inspect.Parameter:
    shown = f" (default: {flag.default})" if flag.default is not None else ""
    option = typer.Option(*flag.decls, help=flag.help + shown, rich_help_panel="Model")
    return inspect.Parameter(
        flag.param,
        inspect.Parameter.KEYWORD_ONLY,
        default=None,
        annotation=Annotated[flag.type | None, option],
    )


class _ModelCommand:
    """A Typer callback whose model flags are derived when the CLI is built, not at import: a mixer
    registered later (a plugin, a test) gets its flags too."""

    def __init__(self, func: Callable[..., Any], exclude: tuple[str, ...]) -> None:
        self.func, self.exclude = func, exclude
        self.__name__, self.__doc__ = func.__name__, func.__doc__
        self.__module__ = func.__module__
        signature = inspect.signature(func, eval_str=True)
        own = [p for name, p in signature.parameters.items() if name != "model_overrides"]
        own = sorted(own, key=lambda p: p.kind != inspect.Parameter.POSITIONAL_OR_KEYWORD)
        self._own = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own]

    @property
    def __signature__(self) -> inspect.Signature:
        return inspect.Signature(self._own + [_flag_parameter(f) for f in model_flags(self.exclude)])

    @property
    def __annotations__(self) -> dict[str, Any]:  # typing.get_type_hints reads these
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}

    def __call__(self, **kwargs: Any) -> Any:
        given = {flag.field: kwargs.pop(flag.param, None) for flag in model_flags(self.exclude)}
        overrides = nested({field: value for field, value in given.items() if value is not None})
        return self.func(model_overrides=overrides, **kwargs)


def model_options(func: Callable[..., Any] | None = None, *, exclude: Iterable[str] = ()) -> Any:
    """Add every model flag to a Typer command; it receives `model_overrides: dict` instead.

    `@model_options` or `@model_options(exclude=("mixer",))` (fields a command sets itself)."""
    if func is None:
        return lambda f: _ModelCommand(f, tuple(exclude))
    return _ModelCommand(func, tuple(exclude))


def model_config(overrides: dict[str, Any], base: dict[str, Any] | None = None) -> ModelConfig:
    """`base` (e.g. a spec's model block) with the flags given on the command line on top."""
    merged = dict(base or {})
    for key, value in overrides.items():
        merged[key] = {**(merged.get(key) or {}), **value} if isinstance(value, dict) else value
    return ModelConfig.model_validate(merged)


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
    """Tokens, parameters, forward FLOPs per image, mixing FLOPs and the mixing Lipschitz bound."""
    described = [
        models.describe_model(model_config({**model_overrides, "image_size": r})) for r in resolution or [224]
    ]
    rows = [row for row, _ in described]
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    cfg = ModelConfig.model_validate(rows[0]["config"])
    title = f"{cfg.mixer} x {cfg.regime}: width {cfg.width}, depth {cfg.depth}, heads {cfg.heads}, patch {cfg.patch_size}"
    table = Table(title=title)
    columns = ("resolution", "tokens", "params", "GFLOPs/image", "mixing MFLOPs", "lipschitz_bound")
    for column in columns:
        table.add_column(column, justify="right")
    for row, n in described:
        bound = "n/a" if row["lipschitz_bound"] is None else f"{row['lipschitz_bound']:.4g}"
        gflops = f"{row['flops_per_image'] / 1e9:.3f}" + (f" ({n} NFE)" if n is not None else "")
        mixing = f"{row['mixing_flops'] / 1e6:.2f}"
        table.add_row(
            str(row["config"]["image_size"]), str(row["tokens"]), f"{row['params']:,}", gflops, mixing, bound
        )
    stdout_console().print(table)
