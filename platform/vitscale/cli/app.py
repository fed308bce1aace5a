"""The Typer application and its command groups; command modules attach to these."""

from typing import Annotated

import typer

from vitscale import __version__

app = typer.Typer(
    name="vitscale",
    help="Hyperparameter searches and scaling studies of ViT token mixers (SSoG vs attention).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
model_app = typer.Typer(help="Inspect model configurations.", no_args_is_help=True)
study_app = typer.Typer(help="Validate, show, run, resume and submit studies.", no_args_is_help=True)
app.add_typer(model_app, name="model")
app.add_typer(study_app, name="study")


def _print_version(value: bool) -> None:
    if value:
        print(f"vitscale {__version__}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    """Options of `vitscale` itself (before a command)."""
