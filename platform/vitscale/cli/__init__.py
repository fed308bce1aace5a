"""`vitscale` console entry point: user errors become one line on stderr and exit code 2."""

from __future__ import annotations

import sys

import click
from pydantic import ValidationError

from vitscale.cli.app import app
from vitscale.errors import UserError
from vitscale.validation import error_lines

# Command modules register themselves on `app` when imported (one line per module).
from vitscale.cli import model_cmd  # noqa: E402,F401
from vitscale.cli import analyze_cmd  # noqa: E402,F401
from vitscale.cli import study_cmd  # noqa: E402,F401
from vitscale.cli import spec_cmd  # noqa: E402,F401
from vitscale.cli import data_cmd  # noqa: E402,F401
from vitscale.cli import train_cmd  # noqa: E402,F401
from vitscale.cli import run_cmd  # noqa: E402,F401
from vitscale.cli import ui_cmd  # noqa: E402,F401


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. UserError and bad flags: one line, exit 2. Bugs keep their traceback."""
    try:
        app(args=argv, standalone_mode=False)
    except click.exceptions.Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except click.UsageError as exc:
        where = f" (see `{exc.ctx.command_path} --help`)" if exc.ctx else ""
        print(f"error: {exc.format_message()}{where}", file=sys.stderr)
        sys.exit(2)
    except click.exceptions.Exit as exc:
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
