"""Command line front end: ``daotai validate | schema | plan | render | boards | qc | doctor`` and more.

Only calls the library. Every DaotaiError becomes a short message and its exit code; no
traceback reaches the user (set DAOTAI_DEBUG=1 to see one).

The commands live in one module per group (``planning``, ``rendering``, ``restore``, ``service``,
``models``; ``draft`` and ``prompts`` in :mod:`daotai.draft.commands`); ``progress`` draws a
render's bars. This module builds the app from them and holds :func:`main`, the entry point.
"""

from __future__ import annotations

import os
import sys

import typer
from rich.markup import escape

from daotai.cli import models, planning, rendering, restore, service
from daotai.cli.common import err
from daotai.draft import commands as draft_commands  # light: no network, no httpx at import
from daotai.errors import Cancelled, DaotaiError, interrupted_inside

__all__ = ["INTERNAL_ERROR_EXIT", "app", "main"]

INTERNAL_ERROR_EXIT = 70  # EX_SOFTWARE (sysexits.h): an exception daotai did not raise on purpose, i.e. a bug


def _build_app() -> typer.Typer:
    """The ``daotai`` app with every command group registered; registration order is the order
    ``daotai --help`` lists the commands in."""
    built = typer.Typer(
        name="daotai",
        help="导演台 daotai — turn a director's shot list into video on your own machine.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    for command in (planning.validate, planning.schema, planning.plan, planning.cameras, rendering.render,
                    planning.boards, rendering.qc, restore.enhance, restore.watch, service.serve, service.backends,
                    service.doctor):
        built.command()(command)
    built.command(name="draft")(draft_commands.draft)
    built.command(name="prompts")(draft_commands.prompts)
    models_app = typer.Typer(help="Video models: list, pull, update, verify, path, rm, convert.", no_args_is_help=True)
    for name, command in models.COMMANDS:
        models_app.command(name)(command)
    built.add_typer(models_app, name="models")
    return built


app = _build_app()


def _print_notes(exc: BaseException) -> None:
    """What a stopped command added to its error: what it finished, where, how to resume."""
    for note in getattr(exc, "__notes__", None) or ():
        err.print(f"  {escape(note)}")


def main() -> None:
    """Entry point: run the app and turn errors into messages and exit codes."""
    try:
        # Without standalone mode click returns an Exit's code instead of raising it.
        code = app(standalone_mode=False)
        if code == 130:  # typer turns Ctrl-C in any command into a silent exit 130
            err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
        if isinstance(code, int) and code:
            sys.exit(code)
    except Cancelled as exc:
        err.print(f"[yellow]cancelled[/yellow] {escape(str(exc))}")
        _print_notes(exc)
        sys.exit(exc.exit_code)
    except DaotaiError as exc:  # every class of the tree carries its exit code (see daotai.errors)
        err.print(f"[red]error[/red] {escape(str(exc))}")
        _print_notes(exc)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("[yellow]cancelled[/yellow]")
        sys.exit(130)
    except KeyboardInterrupt as exc:
        err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
        _print_notes(exc)
        sys.exit(130)
    except Exception as exc:  # the last line of defence: never a traceback for users
        if interrupted_inside(exc):
            err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
            _print_notes(exc)
            sys.exit(130)
        # Usage errors from the command-line parser (click's ClickException, which typer may
        # vendor under another module) know how to print themselves.
        show, code = getattr(exc, "show", None), getattr(exc, "exit_code", None)
        if callable(show) and isinstance(code, int):
            show()
            sys.exit(code)
        if os.environ.get("DAOTAI_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        err.print(
            f"[red]internal error[/red] {type(exc).__name__}: {escape(first)} — this is a bug in daotai; "
            "rerun with DAOTAI_DEBUG=1 for details"
        )
        _print_notes(exc)
        sys.exit(INTERNAL_ERROR_EXIT)
    finally:
        _forget_handled_interrupt()


def _forget_handled_interrupt() -> None:
    """Keep a Ctrl-C that was handled here from killing the process at exit.

    CPython marks a KeyboardInterrupt as unhandled whenever one leaves code run from a string
    (exec/eval: namedtuple and dataclass build their methods that way, so any class made by
    an import during the run), even when a caller catches it; at exit the interpreter then
    kills itself with SIGINT (status -2) instead of exiting with main's code (130 with its
    message). Running a string to completion clears that mark."""
    exec("pass", {})  # noqa: S102 - a constant, run only to reset the interpreter's mark
