"""Disk space for a render: how many bytes it will write, on which file system, and whether they fit.

A render is refused before it starts (:class:`daotai.errors.DiskFull`, naming the folder, the
bytes free there and the bytes needed) when its estimate does not fit; the estimate is the
measured size of each file a render writes per pixel of each frame, times :data:`MARGIN`. The
shot cache gives up its least recently used entries first, so a render is refused only when
the disk is full of other things. A disk that fills up anyway (another program writing, a scene
that encodes larger than the estimate) stops the render with the same error: every writer
writes a temp file renamed onto its target, and the render's staging folder is removed, so
nothing is left half-written.

Where the bytes go: the render's files in a staging folder beside the output folder (the old
output stays until the new one is complete, so it is not counted as free); a shot reused from
the cache is linked, not copied, when the cache is on the same file system (it costs nothing);
a shot rendered now is linked into the cache, which then writes only its kept frames.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

# Bytes per pixel of each frame, per file, measured on previz renders at 1280x720, 24 fps (three
# 4 s shots: a push-in, an orbit and a pan on two characters; the largest of the three shots):
SHOT_BYTES_PER_PIXEL = 0.0254  # the H.264 shot file: 1.99-2.24 MB per 96 frames
DEPTH_BYTES_PER_PIXEL = 0.0375  # FFV1 gray16 depth: 3.13-3.31 MB
DEPTH_PREVIEW_BYTES_PER_PIXEL = 0.0049  # H.264 gray depth preview: 0.36-0.43 MB
MASK_BYTES_PER_PIXEL = 0.0015  # FFV1 gray8 mask: 0.11-0.12 MB
SEQUENCE_BYTES_PER_PIXEL = SHOT_BYTES_PER_PIXEL  # the sequence re-encodes the shots: 6.14 MB for 6.32 MB of shots
# The shot cache keeps 13 RGB frames per shot (QC samples and the contact sheet's middle frame),
# deflated: 1.45-1.57 MB per shot, 4.4 % of the raw 36 MB.
SAMPLE_FRAMES = 13
SAMPLES_RATIO = 0.044
# Plan, cameras (pose files, JSON, USD), timeline, contact sheet, manifest, qc.json: 0.79 MB for
# those three shots, mostly per-frame camera records.
SMALL_FILES_BYTES = 256 * 1024
SMALL_FILES_BYTES_PER_FRAME = 2600
# Neural backends' frames carry texture previz lacks (not measured: the tiny test models make noise,
# which is no guide). Bounds instead: H.264 of detailed video at daotai's quality stays under 0.1
# byte per pixel, and deflate keeps about 60 % of a natural photograph.
NEURAL_SHOT_BYTES_PER_PIXEL = 0.1
NEURAL_SAMPLES_RATIO = 0.6
# Every estimate is the measured size times this: busier scenes than the measured ones (more set
# pieces, faster moves) encode larger. A disk that fills up anyway stops the render cleanly.
MARGIN = 1.5
# An --enhance step can upscale by 4 (16x the pixels) and interpolate: its copies are counted as
# this many times the shots and the sequence.
ENHANCE_FACTOR = 4.0


@dataclass(frozen=True)
class RenderBytes:
    """What one render writes, estimated (MARGIN included)."""

    shots: Mapping[str, int]  # shot id -> its shot file and control files
    samples: Mapping[str, int]  # shot id -> the frames the shot cache keeps
    rest: int  # the sequence, enhanced copies and the small files

    @property
    def total(self) -> int:
        """Bytes of the output folder when nothing is linked."""
        return sum(self.shots.values()) + self.rest


def render_bytes(width: int, height: int, shot_frames: Mapping[str, int], controls: bool, neural: bool = False,
                 enhance: bool = False) -> RenderBytes:
    """Bytes a render of these shots writes, per shot and in all, with MARGIN."""
    pixels = width * height
    shot_rate = NEURAL_SHOT_BYTES_PER_PIXEL if neural else SHOT_BYTES_PER_PIXEL
    per_pixel = shot_rate + (DEPTH_BYTES_PER_PIXEL + DEPTH_PREVIEW_BYTES_PER_PIXEL + MASK_BYTES_PER_PIXEL
                             if controls else 0.0)
    samples = SAMPLE_FRAMES * pixels * 3 * (NEURAL_SAMPLES_RATIO if neural else SAMPLES_RATIO)
    frames = sum(shot_frames.values())
    sequence = frames * pixels * (shot_rate if neural else SEQUENCE_BYTES_PER_PIXEL)
    enhanced = ENHANCE_FACTOR * (frames * pixels * shot_rate + sequence) if enhance else 0.0
    rest = SMALL_FILES_BYTES + SMALL_FILES_BYTES_PER_FRAME * frames + sequence + enhanced
    return RenderBytes({sid: round(n * pixels * per_pixel * MARGIN) for sid, n in shot_frames.items()},
                       {sid: round(samples * MARGIN) for sid in shot_frames}, round(rest * MARGIN))


def existing_folder(path: str | os.PathLike[str]) -> Path:
    """``path`` or its nearest folder that exists (where a folder not made yet will be)."""
    folder = Path(os.path.abspath(path))
    while not folder.is_dir() and folder != folder.parent:
        folder = folder.parent
    return folder


def free_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes free to a normal user on the file system that holds (or will hold) ``path``."""
    return shutil.disk_usage(existing_folder(path)).free


def same_file_system(first: str | os.PathLike[str], second: str | os.PathLike[str]) -> bool:
    """Whether two paths (made or not) are on one file system, so a hard link can join them."""
    return existing_folder(first).stat().st_dev == existing_folder(second).stat().st_dev


def bytes_needed(estimate: RenderBytes, out_dir: Path, cache_dir: Path | None, reused: set[str] | frozenset[str]
                 ) -> dict[Path, int]:
    """The bytes a render needs on each file system it writes to, keyed by its target folder:
    ``out_dir`` (the staging folder is its sibling) and the cache's folder when that is another
    file system. ``reused``: shots the cache holds, linked (or copied, across file systems)."""
    if cache_dir is None:
        return {out_dir: estimate.total}
    linked = same_file_system(out_dir, cache_dir)
    out = estimate.rest + sum(n for sid, n in estimate.shots.items() if sid not in reused or not linked)
    cache = sum(estimate.samples[sid] + (0 if linked else estimate.shots[sid])
                for sid in estimate.shots if sid not in reused)
    if linked:
        return {out_dir: out + cache}
    return {out_dir: out, cache_dir: cache}


def describe_render(shots: int, frames: int, width: int, height: int, controls: bool) -> str:
    """'this render (3 shots, 288 frames at 1280x720 with controls)'."""
    return (f"this render ({shots} shot{'s' if shots != 1 else ''}, {frames} frames at {width}x{height}"
            f"{' with controls' if controls else ''})")
