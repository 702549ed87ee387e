"""Command line front end: ``daotai validate | schema | plan | render | qc | doctor``.

Only calls the library. Every DaotaiError becomes a short message and its exit code; no
traceback reaches the user (set DAOTAI_DEBUG=1 to see one).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.markup import escape

from daotai.errors import Cancelled, DaotaiError, ScriptError

app = typer.Typer(
    name="daotai",
    help="导演台 daotai — turn a director's shot list into video on your own machine.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)

INTERNAL_ERROR_EXIT = 70


def _load(script_path: Path, preset: Optional[str] = None):
    from daotai.script.load import check_reference_files, load_script
    from daotai.script.presets import apply_preset

    script = load_script(script_path)
    missing = check_reference_files(script, script_path.resolve().parent)
    if missing:
        raise ScriptError(missing, str(script_path))
    return apply_preset(script, preset) if preset else script


@app.command()
def validate(
    script: Path = typer.Argument(..., help="script file (.json, .yaml)"),
    as_json: bool = typer.Option(False, "--json", help="print problems as JSON"),
) -> None:
    """Check a script; list every problem with its JSON path, value and rule."""
    try:
        parsed = _load(script)
    except ScriptError as exc:
        if as_json:
            out.print_json(
                data={"ok": False, "issues": [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in exc.issues]}
            )
            raise typer.Exit(exc.exit_code)
        raise
    total = sum(s.duration for s in parsed.shots)
    if as_json:
        out.print_json(data={"ok": True, "shots": len(parsed.shots), "seconds": total})
    else:
        out.print(
            f"[green]ok[/green] {script}: {len(parsed.shots)} shot{'s' if len(parsed.shots) != 1 else ''}, "
            f"{len(parsed.characters)} character{'s' if len(parsed.characters) != 1 else ''}, {total:g} s"
        )


@app.command()
def schema(output: Optional[Path] = typer.Option(None, "-o", "--output", help="write to a file")) -> None:
    """Print the script's JSON Schema (for editors and language models)."""
    from daotai.script.jsonschema import script_json_schema

    text = json.dumps(script_json_schema(), indent=2, ensure_ascii=False) + "\n"
    if output:
        from daotai.deliver.files import atomic_write_text

        atomic_write_text(output, text)
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text)


@app.command()
def plan(
    script: Path = typer.Argument(..., help="script file"),
    output: Path = typer.Option(..., "-o", "--output", help="plan JSON to write"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
) -> None:
    """Turn a script into an exact plan: frames, cameras per frame, seeds, prompts."""
    from daotai.deliver.files import atomic_write_text
    from daotai.plan.planner import plan_script, plan_to_json

    result = plan_script(_load(script, preset))
    atomic_write_text(output, plan_to_json(result))
    for shot in result.shots:
        for warning in shot.warnings:
            err.print(f"[yellow]warning[/yellow] {shot.shot_id}: {escape(warning)}")
    out.print(
        f"[green]planned[/green] {len(result.shots)} shots, {result.total_frames} frames "
        f"({result.total_duration_s:g} s at {result.fps:g} fps, {result.width}x{result.height}) → {output}"
    )


@app.command()
def render(
    script: Path = typer.Argument(..., help="script file, or a plan .json written by `daotai plan`"),
    output: Path = typer.Option(Path("out"), "-o", "--output", help="output folder"),
    backend: str = typer.Option("previz", "--backend", help="render backend"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    shots: Optional[str] = typer.Option(None, "--shots", help="comma-separated shot ids to render"),
    codec: str = typer.Option("h264", "--codec", help="h264 | hevc | prores"),
    controls: bool = typer.Option(True, "--controls/--no-controls", help="write depth and mask channels"),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero when quality checks fail"),
) -> None:
    """Render a script to shots, sequence, controls, contact sheet, timeline, manifest, qc."""
    from daotai.cli_progress import run_with_progress
    from daotai.pipeline import PipelineSettings, load_plan_or_script

    plan_obj = load_plan_or_script(script, preset=preset, loader=_load)
    settings = PipelineSettings(
        backend=backend,
        codec=codec,
        controls=controls,
        shots=tuple(s.strip() for s in shots.split(",") if s.strip()) if shots else (),
        strict=strict,
    )
    result = run_with_progress(plan_obj, output, settings, source=script, console=err)
    out.print(f"[green]done[/green] {result.sequence} ({result.summary})")
    if strict and not result.qc_ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {result.qc_path}")


@app.command()
def qc(
    folder: Path = typer.Argument(..., help="a render output folder (with plan.json)"),
    strict: bool = typer.Option(False, "--strict", help="exit non-zero when any check fails"),
) -> None:
    """Re-run the quality checks on a render folder and rewrite qc.json."""
    from daotai.qc.report import check_folder

    report = check_folder(folder, console=err)
    out.print(report.summary_text())
    if strict and not report.ok:
        from daotai.errors import QualityError

        raise QualityError(f"quality checks failed: see {folder / 'qc.json'}")


@app.command()
def doctor() -> None:
    """What this machine can do: OS, CPU, memory, GPU, libraries, encoders, what fits."""
    from daotai.runtime.doctor import collect, render_table

    out.print(render_table(collect()))


def main() -> None:
    """Entry point: run the app and turn errors into messages and exit codes."""
    try:
        # Without standalone mode click returns an Exit's code instead of raising it.
        code = app(standalone_mode=False)
        if isinstance(code, int) and code:
            sys.exit(code)
    except ScriptError as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except Cancelled as exc:
        err.print(f"[yellow]cancelled[/yellow] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except DaotaiError as exc:
        err.print(f"[red]error[/red] {escape(str(exc))}")
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        err.print("[yellow]cancelled[/yellow]")
        sys.exit(130)
    except KeyboardInterrupt:
        err.print("[yellow]cancelled[/yellow] interrupted; no partial files were left at output paths")
        sys.exit(130)
    except Exception as exc:  # the last line of defence: never a traceback for users
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if os.environ.get("DAOTAI_DEBUG"):
            raise
        err.print(
            f"[red]internal error[/red] {type(exc).__name__}: {escape(str(exc))} — this is a bug in daotai; "
            "rerun with DAOTAI_DEBUG=1 for details"
        )
        sys.exit(INTERNAL_ERROR_EXIT)


if __name__ == "__main__":
    main()
