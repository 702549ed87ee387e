"""The commands that read a script and need no render backend: ``validate``, ``schema``, ``plan``,
``cameras``, and ``boards`` (storyboard pages of a finished render)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.markup import escape

from daotai.cli.common import RESOLUTION_HELP, boards_format, err, out, read_script
from daotai.errors import ScriptError


def validate(
    script: Path = typer.Argument(..., help="script file (.json, .yaml), or - to read it from stdin"),
    as_json: bool = typer.Option(False, "--json", help="print problems as JSON"),
    normalised: bool = typer.Option(
        False, "--normalised", "--normalized", help="print the script in its canonical form (every alias and "
        "shorthand written out, defaults filled in) as JSON"
    ),
) -> None:
    """Check a script and plan it; list every problem with its JSON path, value and rule.

    It plans as render does (timing, transitions, staging, cameras), so a script validate
    passes also starts to render. Field problems come first (a script with them cannot be
    planned); once there are none, every shot is planned and all plan problems are listed
    together. Either kind exits 2, as render does."""
    from daotai.errors import PlanError

    try:
        parsed = read_script(script)
        from daotai.plan.planner import plan_script

        planned = plan_script(parsed)
    except (ScriptError, PlanError) as exc:
        if as_json:
            issues = [{"path": i.path, "value": repr(i.value), "rule": i.rule} for i in exc.issues]
            if not issues:  # a plan problem without a JSON path
                issues = [{"path": None, "value": None, "rule": str(exc)}]
            stage = "script" if isinstance(exc, ScriptError) else "plan"
            out.print_json(data={"ok": False, "stage": stage, "issues": issues})
            raise typer.Exit(exc.exit_code) from None
        raise
    for note in planned.scene.notices:
        err.print(f"[cyan]note[/cyan] {escape(note)}")
    for shot in planned.shots:
        for warning in shot.warnings:
            err.print(f"[yellow]warning[/yellow] {shot.shot_id}: {escape(warning)}")
    total = sum(s.duration for s in parsed.shots)
    canonical = parsed.model_dump(mode="json") if normalised else None
    if as_json:
        out.print_json(data={"ok": True, "shots": len(parsed.shots), "seconds": total,
                             **({"script": canonical} if normalised else {})})
    elif normalised:
        sys.stdout.write(json.dumps(canonical, indent=2, ensure_ascii=False) + "\n")
    else:
        out.print(
            f"[green]ok[/green] {script}: {len(parsed.shots)} shot{'s' if len(parsed.shots) != 1 else ''}, "
            f"{len(parsed.characters)} character{'s' if len(parsed.characters) != 1 else ''}, {total:g} s"
        )


def schema(
    output: Optional[Path] = typer.Option(None, "-o", "--output", help="write to a file"),
    accepted: bool = typer.Option(
        False, "--accepted", help="every spelling `daotai validate` accepts (aliases, other field names, text "
        "durations, sizes, colours, camera phrases) instead of the canonical form"
    ),
) -> None:
    """Print the script's JSON Schema (for editors and language models)."""
    from daotai.script.jsonschema import script_json_schema

    text = json.dumps(script_json_schema(accepted=accepted), indent=2, ensure_ascii=False) + "\n"
    if output:
        from daotai.files import atomic_write_text

        atomic_write_text(output, text)
        err.print(f"wrote {output}")
    else:
        sys.stdout.write(text)


def plan(
    script: Path = typer.Argument(..., help="script file"),
    output: Path = typer.Option(..., "-o", "--output", help="plan JSON to write"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    resolution: Optional[str] = typer.Option(None, "--resolution", help=RESOLUTION_HELP),
) -> None:
    """Turn a script into an exact plan: frames, cameras per frame, seeds, prompts."""
    from daotai.files import atomic_write_text
    from daotai.plan.planner import plan_script, plan_to_json

    result = plan_script(read_script(script, preset, resolution))
    atomic_write_text(output, plan_to_json(result))
    for note in result.scene.notices:
        err.print(f"[cyan]note[/cyan] {escape(note)}")
    for shot in result.shots:
        for warning in shot.warnings:
            err.print(f"[yellow]warning[/yellow] {shot.shot_id}: {escape(warning)}")
    out.print(
        f"[green]planned[/green] {len(result.shots)} shots, {result.total_frames} frames "
        f"({result.total_duration_s:g} s at {result.fps:g} fps, {result.width}x{result.height}) → {output}"
    )


def cameras(
    script: Path = typer.Argument(..., help="script file"),
    output: Path = typer.Option(..., "-o", "--output", help="folder for the camera files"),
    preset: Optional[str] = typer.Option(None, "--preset", help="preview | draft | final: override the size"),
    usd: bool = typer.Option(False, "--usd/--no-usd", help="also USD cameras (needs usd-core: pip install "
                             "'daotai[usd]'); default: pose files and camera-to-world JSON only"),
) -> None:
    """Write every shot's planned camera for other tools: pose files, camera-to-world JSON, USD (--usd); no render."""
    from daotai.deliver.camera_files import write_cameras
    from daotai.plan.planner import plan_script

    result = plan_script(read_script(script, preset))
    written = write_cameras(result, output, usd)
    out.print(f"[green]cameras[/green] {len(result.shots)} shots, {len(written)} files → {output}")


def boards(
    folder: Path = typer.Argument(..., help="a render output folder (with plan.json and shots/)"),
    fmt: str = typer.Option("pdf", "--format", help="pdf (boards.pdf) | png (boards/page_01.png …)"),
    per_page: int = typer.Option(6, "--per-page", help="shots a page: 4, 6, 8, 9 or 12"),
) -> None:
    """Write storyboard pages of a finished render into its folder: each shot's middle frame with its
    framing, move, duration, action, dialogue and transition, as the web console prints them."""
    from daotai.deliver.boards import PER_PAGE_CHOICES, middle_frames, write_boards
    from daotai.errors import DaotaiError, OptionError
    from daotai.plan.layout import RenderLayout
    from daotai.plan.planner import plan_from_json

    chosen = boards_format(fmt, "--format")
    if per_page not in PER_PAGE_CHOICES:
        raise OptionError.at("--per-page", per_page, f"must be one of {', '.join(map(str, PER_PAGE_CHOICES))}")
    layout = RenderLayout.find(folder)
    if not layout.plan.is_file():
        raise DaotaiError(f"{folder}: has no plan.json; is it a daotai render folder?")
    plan_obj = plan_from_json(layout.plan.read_text(encoding="utf-8"))
    for path in write_boards(plan_obj, middle_frames(plan_obj, layout), layout, chosen, per_page):
        out.print(f"wrote {path}")
