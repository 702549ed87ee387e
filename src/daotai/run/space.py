"""Whether a render fits on its disk: checked before anything is written (the shot cache giving
up old entries to make room), and a disk that fills up anyway turned into a DiskFull that names
the file being written, the bytes free and the bytes needed.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Generator

from daotai.plan.model import Plan
from daotai.render.base import Event, Notice
from daotai.run.reuse import chain_cache_misses
from daotai.run.settings import PipelineSettings


def _space_what(plan: Plan, settings: PipelineSettings) -> str:
    from daotai.diskspace import describe_render

    return describe_render(len(plan.shots), plan.total_frames, plan.width, plan.height, settings.controls)


def ensure_space(plan: Plan, settings: PipelineSettings, out_dir: Path, cache: Any,
                 keys: dict[str, str]) -> Generator[Event, None, dict[Path, int]]:
    """Check that the render's files fit on the disk (daotai.diskspace) before any is written;
    the shot cache gives up least recently used entries (not this render's) to make room, with a
    notice. DiskFull names the folder, the bytes free and the bytes needed. Returns the bytes
    needed per folder (for the message of a disk that fills up anyway)."""
    from daotai.diskspace import bytes_needed, free_bytes, render_bytes, same_file_system
    from daotai.errors import DiskFull, size_text
    from daotai.render.registry import spec_for

    estimate = render_bytes(plan.width, plan.height, {s.shot_id: s.frames for s in plan.shots}, settings.controls,
                            neural=spec_for(settings.backend).family is not None, enhance=bool(settings.enhance))
    rerun = set(chain_cache_misses(plan, settings, cache, keys))
    reused = {sid for sid, key in keys.items() if cache is not None and sid not in rerun and cache.has(key)}
    cache_dir = Path(cache.root) if cache is not None else None
    needs = bytes_needed(estimate, Path(os.path.abspath(out_dir)), cache_dir, reused)
    for folder, need in needs.items():
        free = free_bytes(folder)
        if free < need and cache is not None and same_file_system(folder, cache.root):
            freed = cache.free_up(need - free, keep=set(keys.values()))
            if freed:
                yield Notice("info", f"the shot cache gave up {size_text(freed)} of its least recently used "
                                     "shots to make room for this render")
            free = free_bytes(folder)
        if free < need:
            raise DiskFull(folder, free, need, _space_what(plan, settings))
    return needs


def disk_full_error(exc: BaseException, out_dir: Path, staging: Path, needed: dict[Path, int], plan: Plan,
                    settings: PipelineSettings) -> Any:
    """A DiskFull for a render the disk stopped (``exc`` says no space was left somewhere in its
    chain), naming the file being written, the bytes free now and the bytes needed; None for
    any other error (a DiskFull raised on purpose stays as it is)."""
    from daotai.diskspace import free_bytes
    from daotai.errors import DiskFull, disk_full_cause
    from daotai.files import target_of_temp

    cause = disk_full_cause(exc)
    if cause is None or isinstance(exc, DiskFull):
        return None
    name = cause.filename2 or cause.filename
    writing = "a file"
    folder = Path(os.path.abspath(out_dir))
    if name:
        path = Path(os.fsdecode(name))
        path = target_of_temp(path) or path
        try:
            writing = path.relative_to(staging).as_posix()
        except ValueError:
            writing = str(path)
            folder = path.parent
    need = next((n for f, n in needed.items() if folder.is_relative_to(f)), None)
    if need is None and needed:  # a file of the cache, on the output's file system
        need = max(needed.values())
    return DiskFull(folder, free_bytes(folder), need, _space_what(plan, settings), writing=writing)
