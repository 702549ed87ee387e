"""Watch folder: every new video dropped into a folder is enhanced to <name>_enhanced.mp4.

A file is taken only once it is complete: no ``<name>.writing`` / ``<name>.part`` sidecar
beside it, and its size and modification time unchanged since the previous poll (or, on
the first sight, untouched for ``settle_s`` seconds). The folder's own outputs — files
named ``*_enhanced.*``, ``*.enhance.json``, hidden temp files of the atomic writer — are
never inputs. A file that cannot be decoded or enhanced is moved to ``failed/`` with a
``<name>.error.txt`` beside it and a log line. ``.daotai-watch.json`` (atomic) remembers
what was done, keyed by name, size and mtime, so a restart redoes nothing; a file replaced
by a new version (other size or mtime) is processed again.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from daotai.encode.video import EncodeSettings
from daotai.errors import Cancelled, DaotaiError
from daotai.files import atomic_write_text
from daotai.post.enhance import ENHANCED_SUFFIX, Step, enhance, enhanced_name
from daotai.render.base import RunContext

__all__ = ["WatchConfig", "WatchEvent", "scan_once", "watch"]

log = logging.getLogger("daotai.watch")

VIDEO_SUFFIXES = (".mp4", ".mov", ".mkv", ".m4v", ".webm", ".avi")
SIDECARS = (".writing", ".part", ".lock")  # "<name><sidecar>" present: still being written
STATE_NAME = ".daotai-watch.json"
FAILED_DIR = "failed"


@dataclass(frozen=True)
class WatchConfig:
    """How a folder is watched."""

    steps: tuple[Step, ...]
    settings: EncodeSettings | None = None
    interval_s: float = 2.0  # time between polls
    settle_s: float = 5.0  # a file first seen untouched this long counts as complete


@dataclass(frozen=True)
class WatchEvent:
    """What happened to one file in a scan: done | failed | waiting | skipped."""

    name: str
    status: str
    detail: str = ""


@dataclass
class _State:
    """The state file: finished/failed files and sizes seen at the previous poll."""

    done: dict[str, dict] = field(default_factory=dict)  # name → {size, mtime_ns, output}
    seen: dict[str, list[int]] = field(default_factory=dict)  # name → [size, mtime_ns]


def _load_state(folder: Path) -> _State:
    """Read the state file (an unreadable one is treated as empty: work is then redone)."""
    path = folder / STATE_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return _State(done=dict(data.get("done", {})), seen=dict(data.get("seen", {})))
    except (OSError, ValueError, AttributeError):
        return _State()


def _save_state(folder: Path, state: _State) -> None:
    """Write the state file atomically."""
    text = json.dumps({"done": state.done, "seen": state.seen}, indent=1, sort_keys=True)
    atomic_write_text(folder / STATE_NAME, text + "\n")


def is_candidate(path: Path) -> bool:
    """A video the watcher may process: not hidden, not one of its outputs."""
    name = path.name
    return (
        path.is_file()
        and not name.startswith(".")
        and path.suffix.lower() in VIDEO_SUFFIXES
        and not path.stem.endswith(ENHANCED_SUFFIX)
    )


def _stamp(path: Path) -> list[int]:
    """[size, mtime_ns] of a file."""
    st = path.stat()
    return [st.st_size, st.st_mtime_ns]


def _has_sidecar(path: Path) -> bool:
    """True while a '<name>.writing'-style marker says the file is not finished."""
    return any(path.with_name(path.name + marker).exists() for marker in SIDECARS)


def _output_for(path: Path) -> Path:
    """<name>_enhanced.mp4 beside the input (always MP4: the default H.264 writer)."""
    return enhanced_name(path).with_suffix(".mp4")


def _fail(folder: Path, path: Path, error: Exception) -> str:
    """Move a bad file to failed/ with an error note; returns the message logged."""
    failed = folder / FAILED_DIR
    failed.mkdir(exist_ok=True)
    target = failed / path.name
    if target.exists():
        target = failed / f"{path.stem}.{time.strftime('%Y%m%d-%H%M%S')}{path.suffix}"
    shutil.move(str(path), str(target))
    atomic_write_text(target.with_name(target.name + ".error.txt"), f"{type(error).__name__}: {error}\n")
    return f"{path.name}: moved to {FAILED_DIR}/ ({error})"


def _ready(path: Path, stamp: list[int], state: _State, settle_s: float, now: float) -> bool:
    """Complete when unchanged since the previous poll, or quiet for settle_s on first sight."""
    if _has_sidecar(path):
        return False
    if state.seen.get(path.name) == stamp:
        return True
    return now - stamp[1] / 1e9 >= settle_s


def scan_once(
    folder: str | Path,
    config: WatchConfig,
    ctx: RunContext | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Iterator[WatchEvent]:
    """One poll of the folder: enhance every complete new video; yields what happened."""
    folder = Path(folder)
    if not folder.is_dir():
        raise DaotaiError(f"watch: {str(folder)!r} is not a folder")
    ctx = ctx or RunContext()
    state = _load_state(folder)
    seen: dict[str, list[int]] = {}
    try:
        for path in sorted(folder.iterdir()):
            ctx.check()
            if not is_candidate(path):
                continue
            try:
                stamp = _stamp(path)
            except FileNotFoundError:
                continue  # removed while we looked
            record = state.done.get(path.name)
            if record and [record["size"], record["mtime_ns"]] == stamp:
                continue  # finished in this or an earlier run
            if not _ready(path, stamp, state, config.settle_s, time.time()):
                seen[path.name] = stamp
                yield WatchEvent(path.name, "waiting", "still being written")
                continue
            output = _output_for(path)

            def progress(done: int, total: int, name: str = path.name) -> None:
                """Forward progress; a cancel stops the file between frames."""
                ctx.check()
                if on_progress is not None:
                    on_progress(name, done, total)

            try:
                enhance(path, output, config.steps, config.settings, on_progress=progress, ctx=ctx)
            except Cancelled:
                raise
            except (DaotaiError, OSError) as error:
                message = _fail(folder, path, error)
                log.warning(message)
                yield WatchEvent(path.name, "failed", message)
                continue
            state.done[path.name] = {"size": stamp[0], "mtime_ns": stamp[1], "output": output.name}
            _save_state(folder, state)  # after every file, so a crash loses at most one
            log.info("%s: wrote %s", path.name, output.name)
            yield WatchEvent(path.name, "done", output.name)
    finally:
        state.seen = seen
        _save_state(folder, state)


def watch(
    folder: str | Path,
    config: WatchConfig,
    ctx: RunContext | None = None,
    on_progress: Callable[[str, int, int], None] | None = None,
) -> Iterator[WatchEvent]:
    """Poll forever (until ctx.cancel is set), yielding every file event."""
    ctx = ctx or RunContext()
    while not ctx.cancel.is_set():
        yield from scan_once(folder, config, ctx, on_progress)
        ctx.cancel.wait(config.interval_s)


def run_watch(folder: str | Path, steps: Sequence[Step], once: bool, interval_s: float = 2.0,
              settle_s: float = 5.0) -> Iterator[WatchEvent]:
    """Front-end helper: one scan or a watch loop with the given steps."""
    config = WatchConfig(tuple(steps), interval_s=interval_s, settle_s=settle_s)
    return scan_once(folder, config) if once else watch(folder, config)
