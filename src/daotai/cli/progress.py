"""Drive a pipeline run with a rich progress display: one bar per shot and one overall."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from daotai.errors import DaotaiError
from daotai.events import Notice, Output
from daotai.events import Progress as ProgressEvent
from daotai.plan.model import Plan
from daotai.run.progress_labels import ShotOrder


def run_with_progress(plan: Plan, out_dir: Path, settings, source: Path | None, console: Console):
    """Run the pipeline, drawing progress; returns its RunResult."""
    from daotai.cluster import executor_for
    from daotai.plan.planner import select_shots
    from daotai.run.pipeline import run
    from daotai.run.records import Finished

    shown = select_shots(plan, list(settings.shots)) if settings.shots else plan
    total_frames = sum(s.frames for s in shown.shots)
    columns = (
        TextColumn("{task.description}", justify="left"),
        BarColumn(bar_width=None),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
    )
    result = None
    order = ShotOrder.of(shown)  # "rendering shot 3/7 (s03)": every label numbers the shot in the plan
    with Progress(*columns, console=console, transient=False, disable=not console.is_terminal and False) as bars:
        overall = bars.add_task("[bold]all shots", total=total_frames)
        shot_tasks: dict[str, TaskID] = {}
        done_frames: dict[str, int] = {}
        for event in run(plan, out_dir, settings, source=source, executor=executor_for(settings)):
            if isinstance(event, ProgressEvent):
                label = escape(order.label(event))
                # the overall bar always says what the run is doing now, whatever the stage
                bars.update(overall, description=f"[bold]{label}")
                if event.stage == "render" and event.shot_id is not None:
                    if event.shot_id not in shot_tasks:
                        shot_tasks[event.shot_id] = bars.add_task(f"  {escape(event.shot_id)}", total=event.total)
                        bars.console.print(f"[dim]{label}…[/dim]")  # a log line too, for output that is not a terminal
                    bars.update(shot_tasks[event.shot_id], completed=event.done)
                    done_frames[event.shot_id] = event.done
                    bars.update(overall, completed=sum(done_frames.values()))
                elif event.stage == "enhance" and event.shot_id is not None:
                    key = f"{event.shot_id} enhance"
                    if key not in shot_tasks:
                        shot_tasks[key] = bars.add_task(f"  {escape(event.shot_id)} enhance", total=event.total)
                    bars.update(shot_tasks[key], completed=event.done)
                elif event.stage in ("assemble", "qc", "deliver") and (event.done == 0 or event.message):
                    # each stage after the render says what it is doing: "checking shot 2/7 (s02)"
                    bars.console.print(f"[dim]{label}…[/dim]")
            elif isinstance(event, Notice):
                where = f"{event.shot_id}: " if event.shot_id else ""
                colour = "yellow" if event.level == "warning" else "cyan"
                bars.console.print(f"[{colour}]{event.level}[/{colour}] {escape(where + event.text)}")
            elif isinstance(event, Output) and event.kind == "sequence":
                bars.console.print(f"[dim]wrote {escape(event.path)}[/dim]")
            elif isinstance(event, Finished):
                result = event.result
    if result is None:
        raise DaotaiError("the render ended without a result")
    qc_lines(Path(result.qc_path), console)
    return result


def qc_lines(qc_path: Path, console: Console) -> None:
    """One line per shot that failed a check or has a note: its verdicts, what failed first."""
    import json

    try:
        report = json.loads(qc_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    for shot in report.get("shots") or []:
        text = shot.get("summary") or "; ".join(shot.get("failures") or [])
        if not shot.get("ok", True):
            console.print(f"[red]qc FAIL[/red] {escape(shot['shot_id'])}: {escape(text)}")
        for note in shot.get("warnings") or []:
            console.print(f"[yellow]qc note[/yellow] {escape(shot['shot_id'])}: {escape(note)}")
    sequence = report.get("sequence") or {}
    if sequence and not sequence.get("ok", True):
        console.print(f"[red]qc FAIL[/red] sequence: {escape('; '.join(sequence.get('failures') or []))}")
