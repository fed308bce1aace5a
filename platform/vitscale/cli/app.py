"""The Typer application and its command groups; command modules attach to these."""

import typer

app = typer.Typer(
    name="vitscale",
    help="Hyperparameter searches and scaling studies of ViT token mixers (SSoG vs attention).",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
model_app = typer.Typer(help="Inspect model configurations.", no_args_is_help=True)
study_app = typer.Typer(help="Validate, show, run, resume and submit studies.", no_args_is_help=True)
# `vitscale spec schema` was the name before `vitscale study schema`: kept, hidden, for one release.
spec_app = typer.Typer(help="Old name of `vitscale study schema`.", no_args_is_help=True, hidden=True)
app.add_typer(model_app, name="model")
app.add_typer(study_app, name="study")
app.add_typer(spec_app, name="spec", hidden=True)
