"""`vitscale` console entry point: user errors become one line on stderr and exit code 2."""

from __future__ import annotations

import sys

import click
import typer
from pydantic import ValidationError

# Command modules register themselves on `app` when imported (one per command group).
from vitscale.cli import (  # noqa: F401
    analyze_cmd,
    bench_cmd,
    data_cmd,
    model_cmd,
    run_cmd,
    spec_cmd,
    study_cmd,
    train_cmd,
    ui_cmd,
)
from vitscale.cli.app import app
from vitscale.errors import UserError
from vitscale.validation import error_lines

try:  # Typer >= 0.26 vendors click: its exceptions are not click's, so catch both kinds.
    from typer._click.exceptions import UsageError as _TyperUsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    _TyperUsageError = click.UsageError
USAGE_ERRORS = (click.UsageError, _TyperUsageError)
ABORTS = (click.exceptions.Abort, typer.Abort)
EXITS = (click.exceptions.Exit, typer.Exit)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. UserError and bad flags: one line, exit 2. Bugs keep their traceback."""
    try:
        app(args=argv, standalone_mode=False)
    except ABORTS:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except USAGE_ERRORS as exc:
        if type(exc).__name__ == "NoArgsIsHelpError" and exc.ctx is not None:
            print(exc.ctx.get_help())
            sys.exit(0)
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        print(f"error: {exc.format_message()}{where}", file=sys.stderr)
        sys.exit(2)
    except EXITS as exc:
        sys.exit(exc.exit_code)
    except UserError as exc:
        # Some user errors carry several problems (a spec file): one line each.
        for line in getattr(exc, "lines", None) or [str(exc)]:
            print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:
        for line in error_lines(exc):
            print(f"error: {line}", file=sys.stderr)
        sys.exit(2)
