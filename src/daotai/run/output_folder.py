"""The output folder a render replaces, and the staging folder it renders into.

A render never writes into its output folder: it fills a hidden staging sibling
(``.<name>.daotai-staging-<hex>``, daotai.files.staging_folder), marked with the process that
owns it, and the run swaps it in whole once the manifest is written. Here: whether a folder may
be replaced (:func:`check_output_folder`: empty, absent or a render of the same script, else
``force``), a fresh staging folder (dead runs' leftovers cleared), how far a run got
(:class:`RunTrace`) and, when it stops, what it finished and how to go on (:func:`stopped_note`).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Generator, Literal

from daotai.plan.layout import RenderLayout
from daotai.plan.model import Plan
from daotai.render.base import Event, Output, Progress
from daotai.run.records import RunResult
from daotai.run.settings import PipelineSettings


def mark_in_progress(layout: RenderLayout, plan_text: str) -> None:
    """Mark a staging folder as being rendered into until its manifest is written: by which
    process on which host (:func:`open_staging` removes the staging folders of dead processes)."""
    import hashlib
    import socket
    from datetime import datetime, timezone

    from daotai.files import atomic_write_text

    atomic_write_text(layout.in_progress, json.dumps({
        "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "plan_sha256": hashlib.sha256(plan_text.encode("utf-8")).hexdigest(),
        "pid": os.getpid(),
        "host": socket.gethostname(),
    }, indent=1) + "\n")


FolderState = Literal["absent", "empty", "same_script", "other_script", "not_a_render"]


DEFAULT_TITLE = "Untitled"  # the script schema's default title: names no script


@dataclass(frozen=True)
class OutputFolder:
    """What a render's output folder holds now, and what the render does with it."""

    path: Path
    state: FolderState
    foreign: tuple[str, ...] = ()  # files in it that no render wrote (relative paths)
    previous: str = ""  # the earlier render's script, in words
    keep_old: Path | None = None  # where the old folder goes instead of being deleted (it held foreign files)

    def describe(self) -> str:
        if self.state == "other_script":
            return f"a render of another script, {self.previous}"
        if self.state == "not_a_render":
            return "not a daotai render: it has files but no manifest.json"
        return self.state.replace("_", " ")


def _script_identity(plan: Plan, source: Path | None) -> dict[str, Any]:
    """What names a script: its content hash, its file and its title."""
    resolved = str(Path(source).resolve()) if source is not None else None
    return {"script_hash": plan.script_hash, "resolved": resolved, "title": plan.title}


def _previous_identity(layout: RenderLayout, manifest: dict[str, Any]) -> dict[str, Any]:
    """The script identity an earlier render recorded (its manifest, its plan.json's title)."""
    src = manifest.get("source") or {}
    resolved = src.get("resolved") or (src.get("path") if src.get("path") and Path(src["path"]).is_absolute() else None)
    try:
        title = json.loads(layout.plan.read_text(encoding="utf-8")).get("title")
    except (OSError, ValueError, AttributeError):
        title = None
    return {"script_hash": manifest.get("script_hash"), "resolved": resolved, "title": title}


def same_script(before: dict[str, Any], now: dict[str, Any]) -> bool:
    """Whether an earlier render and this one are of one script: the same content, the same
    script file, or the same title (not the default one). An edited script re-renders into
    its folder; a different script file with a different title is another script."""
    if before.get("script_hash") and before["script_hash"] == now["script_hash"]:
        return True
    if before.get("resolved") and now.get("resolved"):
        if before["resolved"] == now["resolved"]:
            return True
    elif not before.get("resolved") and not now.get("resolved"):
        return before.get("title") == now["title"]  # library calls and services name no file
    return bool(before.get("title")) and before["title"] == now["title"] and now["title"] != DEFAULT_TITLE


def check_output_folder(out_dir: Path, plan: Plan, source: Path | None, force: bool) -> OutputFolder:
    """Whether a render of ``plan`` may replace ``out_dir``; OptionError (naming --output and
    --force) when it is not empty, absent or a render of the same script and ``force`` is off.

    A folder holding files daotai did not write (a user's notes, another tool's output) needs
    ``force`` too, even a render of this script; with it the old folder is kept whole beside the
    new one (``<name>.replaced-<UTC time>``), never deleted. The new render never shares its
    folder with foreign files.
    """
    from daotai.errors import Issue, OptionError
    from daotai.plan.layout import DESKTOP_FILES

    out_dir = Path(out_dir)
    if not out_dir.exists():
        return OutputFolder(out_dir, "absent")
    if all(p.is_dir() or p.name in DESKTOP_FILES for p in out_dir.rglob("*")):  # folders, a desktop's cache
        return OutputFolder(out_dir, "empty")
    layout = RenderLayout.find(out_dir)
    manifest: dict[str, Any] | None = None
    if layout.manifest.is_file():
        try:
            manifest = json.loads(layout.manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            manifest = None
    listed = frozenset((manifest or {}).get("files") or {}) if isinstance(manifest, dict) else frozenset()
    foreign = tuple(layout.foreign_files(set(listed)))
    if not isinstance(manifest, dict):
        state: FolderState = "not_a_render"
        previous = ""
    else:
        before = _previous_identity(layout, manifest)
        same = same_script(before, _script_identity(plan, source))
        state = "same_script" if same else "other_script"
        previous = f"{before.get('title')!r}" + (f" ({before['resolved']})" if before.get("resolved") else "")
    folder = OutputFolder(out_dir, state, foreign, previous)
    if state == "same_script" and not foreign:
        return folder
    if not force:
        what = folder.describe() if state != "same_script" else "a render of this script"
        extra = (f"; it holds {len(foreign)} file(s) daotai did not write ({', '.join(foreign[:4])}"
                 f"{' …' if len(foreign) > 4 else ''})") if foreign else ""
        raise OptionError(Issue("--output", str(out_dir), f"is {what}{extra}; choose an empty or new folder, or "
                                "pass --force to replace it (daotai deletes only files it wrote: a folder "
                                "holding others is kept whole beside the new render)"))
    if foreign:
        from datetime import datetime, timezone

        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        absolute = Path(os.path.abspath(out_dir))
        folder = replace(folder, keep_old=absolute.with_name(f"{absolute.name}.replaced-{stamp}"))
    return folder


STALE_STAGING_S = 24 * 3600.0  # a staging folder without a readable marker this old is a dead run's


def _staging_is_dead(folder: Path) -> bool:
    """Whether a staging folder belongs to a render that is no longer running (on this host)."""
    import socket

    from daotai.plan.layout import IN_PROGRESS

    try:
        marker = json.loads((folder / IN_PROGRESS).read_text(encoding="utf-8"))
        pid, host = int(marker["pid"]), str(marker["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return time.time() - folder.stat().st_mtime > STALE_STAGING_S
    if host != socket.gethostname() or os.name == "nt":  # another host's, or no signal-0 probe
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False
    return False


def open_staging(out_dir: Path) -> Path:
    """A fresh staging folder beside ``out_dir``, after removing those of renders that died there
    (and a replaced folder whose removal a crash cut short)."""
    from daotai.files import ASIDE_MARK, STAGING_MARK, remove_quietly, siblings_of, staging_folder

    out_dir.parent.mkdir(parents=True, exist_ok=True)
    for leftover in siblings_of(out_dir, STAGING_MARK):
        if _staging_is_dead(leftover):
            remove_quietly(leftover)
    if out_dir.exists():
        for leftover in siblings_of(out_dir, ASIDE_MARK):
            remove_quietly(leftover)
    staging = staging_folder(out_dir)
    staging.mkdir()
    return staging


@dataclass
class RunTrace:
    """How far a run got: what a stopped run's note says."""

    total: int = 0
    before: str = "absent"  # what the output folder held before the run (OutputFolder.state)
    stage: str = "plan"
    shot: str | None = None  # the shot being rendered
    finished: list[str] = field(default_factory=list)  # shots whose files were complete
    cached: list[str] = field(default_factory=list)  # shots kept in the shot cache


def final_paths(events: Generator[Event, None, RunResult], staging: Path, out_dir: Path,
                 trace: RunTrace) -> Generator[Event, None, RunResult]:
    """The run's events with output paths where the files will be once the staging folder is
    swapped in (``written``: where each is until then); follows the shot being rendered and the shots finished into ``trace``."""
    prefix = str(staging)
    while True:
        try:
            event = next(events)
        except StopIteration as stop:
            result = stop.value
            break
        if isinstance(event, Progress) and event.stage == "render" and event.shot_id:
            trace.shot = event.shot_id
        elif isinstance(event, Output):
            if event.kind == "shot" and event.shot_id and event.shot_id not in trace.finished:
                trace.finished.append(event.shot_id)
            if event.path.startswith(prefix):
                event = replace(event, path=str(out_dir) + event.path[len(prefix):], written=event.path)
        yield event
    return result


def stopped_note(out_dir: Path, trace: RunTrace, settings: PipelineSettings) -> str:
    """What a stopped render finished, where it is, and how to go on (one paragraph)."""
    where = {"plan": "before the first shot", "render": f"while rendering shot {trace.shot}" if trace.shot
             else "before the first shot", "assemble": "while assembling the sequence", "enhance": "while enhancing",
             "qc": "during the quality checks", "deliver": "while writing the deliverables",
             "manifest": "while writing the manifest", "swap": "while putting the new render in place"}
    done = f"{len(trace.finished)} of {trace.total} shot(s) finished" + \
        (f" ({', '.join(trace.finished[:8])}{' …' if len(trace.finished) > 8 else ''})" if trace.finished else "")
    folder = {"absent": f"{out_dir} was not created", "empty": f"{out_dir} is untouched (it was empty)",
              "not_a_render": f"{out_dir} is untouched"}.get(
        trace.before, f"{out_dir} is untouched: it still holds the earlier render")
    if trace.cached:
        resume = (f"The finished shots are kept in the shot cache ({settings.cache}): render again with the same "
                  f"command to resume; only the {trace.total - len(trace.cached)} other shot(s) are drawn")
    elif settings.cache and trace.finished:
        resume = "None of them was kept in the shot cache: rendering again draws every shot"
    elif settings.cache:
        resume = "No shot had finished: rendering again starts from the first shot"
    else:
        resume = "Without a shot cache nothing was kept: rendering again draws every shot (a render with " \
                 "the cache, without --no-cache or DAOTAI_NO_CACHE, keeps finished shots)"
    return f"Render stopped {where.get(trace.stage, trace.stage)}; {done}. {folder}. {resume}."
