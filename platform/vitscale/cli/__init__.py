"""`vitscale` console entry point: user errors become one line on stderr and exit code 2."""

from __future__ import annotations

import gc
import sys

import click
import typer
from pydantic import ValidationError

from vitscale import openmp
from vitscale.errors import StudyInterrupted, TrialFailure, UserError
from vitscale.models.registry import MIXERS

# The command modules' flags read the registries, which load VITSCALE_PLUGINS on first use: load
# them first, so a plugin that fails its protocol (models.protocols) is a user error, one line and
# exit 2, like any other, before any command module is imported.
try:
    MIXERS.keys()
except UserError as exc:
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(2) from None

# Command modules register themselves on `app` when imported (one per command group).
from vitscale.cli import (  # noqa: E402, F401
    analyze_cmd,
    bench_cmd,
    dashboard_cmd,
    data_cmd,
    evaluate_cmd,
    model_cmd,
    run_cmd,
    schema_cmd,
    study_cmd,
    train_cmd,
    ui_cmd,
)
from vitscale.cli.app import app  # noqa: E402
from vitscale.validation import error_lines  # noqa: E402

try:  # Typer >= 0.26 vendors click: its exceptions are not click's, so catch both kinds.
    from typer._click.exceptions import UsageError as _TyperUsageError
except ImportError:  # pragma: no cover - older Typer uses click itself
    _TyperUsageError = click.UsageError
USAGE_ERRORS = (click.UsageError, _TyperUsageError)
ABORTS = (click.exceptions.Abort, typer.Abort)
EXITS = (click.exceptions.Exit, typer.Exit)


def main(argv: list[str] | None = None) -> None:
    """Run the CLI. UserError and bad flags: one line, exit 2. Bugs keep their traceback."""
    openmp.wait_passively_here()  # before any command imports torch (see vitscale.openmp)
    try:
        # Without standalone mode Typer returns the code of a `typer.Exit` (and of Ctrl-C, 130)
        # instead of exiting with it: pass it on, or a stopped command would exit 0.
        code = app(args=argv, standalone_mode=False)
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
    except StudyInterrupted as exc:  # a study stopped by Ctrl-C / SIGTERM: 130 / 143
        print(f"stopped: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except UserError as exc:
        # Some user errors carry several problems (a spec file): one line each.
        for line in getattr(exc, "lines", None) or [str(exc)]:
            print(f"error: {_one_line(line)}", file=sys.stderr)
        sys.exit(2)
    except ValidationError as exc:
        for line in error_lines(exc):
            print(f"error: {_one_line(line)}", file=sys.stderr)
        sys.exit(2)
    except TrialFailure as exc:  # outside a study (train, model info) it ends the command
        print(f"error: {exc.reason}: {' '.join(str(exc).split())}", file=sys.stderr)
        sys.exit(2)
    except (MemoryError, RuntimeError) as exc:
        if not _out_of_memory(exc):
            raise
        print(
            f"error: out of memory: {_first_line(exc)}; choose a smaller model (--width, --depth, "
            "--mlp-ratio), batch or resolution",
            file=sys.stderr,
        )
        sys.exit(2)
    if isinstance(code, int) and code:
        sys.exit(code)


def entry() -> None:
    """The `vitscale` console script and `python -m vitscale`: `main`, then a quick exit. A study's
    process took 3.3-3.9 s from its last line to its exit on 2 cores: Ray's exit hook, then the
    interpreter's last garbage collections over every object torch, Ray and MLflow made. Ray shut
    down here and those objects frozen out of the collector (`gc.freeze`), 1.7 s. In-process
    callers of `main` (tests, notebooks) keep their Ray and their collector."""
    try:
        main()
    finally:
        ray = sys.modules.get("ray")
        if ray is not None and ray.is_initialized():
            ray.shutdown()
        gc.freeze()


def _one_line(text: str) -> str:
    """A problem stays on its line: a key or value holding a newline or control code is escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _out_of_memory(exc: BaseException) -> bool:
    """MemoryError, or torch's allocator giving up (CPU or CUDA): a resource the user asked too much of."""
    text = str(exc)
    return isinstance(exc, MemoryError) or "can't allocate memory" in text or "out of memory" in text


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
