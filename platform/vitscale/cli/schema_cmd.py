"""`vitscale study schema`: the JSON Schema of study (or search-space) files, for editors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from vitscale.cli.app import study_app
from vitscale.study import space_schema, study_schema


@study_app.command("schema")
def schema(
    space: Annotated[bool, typer.Option("--space", help="schema of search-space files instead")] = False,
    out: Annotated[Path | None, typer.Option("--out", help="write to this file instead of stdout")] = None,
) -> None:
    """Print the JSON Schema (e.g. for `# yaml-language-server: $schema=...` in VS Code)."""
    text = json.dumps(space_schema() if space else study_schema(), indent=2)
    if out is None:
        typer.echo(text)
    else:
        out.write_text(text + "\n", encoding="utf-8")
        typer.echo(f"wrote {out}")
