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
REFERENCE_PIXELS = 1280 * 720
SHOT_BYTES_PER_PIXEL = 0.0254  # the H.264 shot file: 1.99-2.24 MB per 96 frames
DEPTH_BYTES_PER_PIXEL = 0.0375  # FFV1 gray16 depth: 3.13-3.31 MB
DEPTH_PREVIEW_BYTES_PER_PIXEL = 0.0049  # H.264 gray depth preview: 0.36-0.43 MB
MASK_BYTES_PER_PIXEL = 0.0015  # FFV1 gray8 mask: 0.11-0.12 MB
# Previz pictures are flat colours that compress to their edges, so a frame's bytes grow slower
# than its pixels: the depth file (the largest) per frame is 7.0x larger at 1280x720 than at
# 320x180 (16x the pixels), 2.6x larger than at 640x360 (4x): about pixels ** 0.7. Videos are
# scaled from the measurement above as pixels ** VIDEO_SCALING, a little steeper to err large.
VIDEO_SCALING = 0.75
# The shot cache keeps 13 RGB frames per shot (QC samples and the contact sheet's middle frame),
# deflated: 118 kB a frame at 1280x720 (1.45-1.57 MB per shot), 58 kB at 640x360, 25 kB at 320x180
# (pixels ** 0.57).
SAMPLE_FRAMES = 13
SAMPLE_BYTES_PER_FRAME = 118_000
SAMPLES_SCALING = 0.5
# Plan, cameras (pose files, JSON, USD), timeline, contact sheet, manifest, qc.json: 0.79 MB for
# those three shots, mostly per-frame camera records.
SMALL_FILES_BYTES = 256 * 1024
SMALL_FILES_BYTES_PER_FRAME = 2600
# Neural backends' frames carry texture previz lacks (not measured: the tiny test models make noise,
# which is no guide). Bounds instead: H.264 of detailed video at daotai's quality stays under 0.1
# byte per pixel, deflate keeps about 60 % of a natural photograph, and neither shrinks with size.
NEURAL_SHOT_BYTES_PER_PIXEL = 0.1
NEURAL_SAMPLES_RATIO = 0.6
# Every estimate is the measured size times this: busier scenes than the measured ones (more set
# pieces, faster moves) encode larger. With it a 1280x720 previz render asks for 1.3x the bytes it
# writes, a 640x360 one 1.6x (tests/test_disk_full.py checks 320x180 and 1280x720). Larger would refuse renders
# that fit (a 3-shot 720p job on a 40 MB disk); a disk that fills up anyway stops the render cleanly.
MARGIN = 1.25
# An --enhance step can upscale by 4 (16x the pixels) and interpolate: its copies are counted as
# this many times the shots and the sequence.
ENHANCE_FACTOR = 4.0


def frame_scale(pixels: int, exponent: float) -> float:
    """A frame of ``pixels`` in reference frames (1280x720), its bytes growing as pixels ** exponent."""
    return (pixels / REFERENCE_PIXELS) ** exponent


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
    if neural:  # detailed pictures: bytes in proportion to pixels
        video = NEURAL_SHOT_BYTES_PER_PIXEL * pixels
        sample = NEURAL_SAMPLES_RATIO * pixels * 3
    else:
        video = SHOT_BYTES_PER_PIXEL * REFERENCE_PIXELS * frame_scale(pixels, VIDEO_SCALING)
        sample = SAMPLE_BYTES_PER_FRAME * frame_scale(pixels, SAMPLES_SCALING)
    controls_rate = DEPTH_BYTES_PER_PIXEL + DEPTH_PREVIEW_BYTES_PER_PIXEL + MASK_BYTES_PER_PIXEL
    per_frame = video + (controls_rate * REFERENCE_PIXELS * frame_scale(pixels, VIDEO_SCALING) if controls else 0.0)
    frames = sum(shot_frames.values())
    sequence = frames * video  # the shots cut together: 6.14 MB for 6.32 MB of shots at 1280x720
    enhanced = ENHANCE_FACTOR * 2 * sequence if enhance else 0.0
    rest = SMALL_FILES_BYTES + SMALL_FILES_BYTES_PER_FRAME * frames + sequence + enhanced
    return RenderBytes({sid: round(n * per_frame * MARGIN) for sid, n in shot_frames.items()},
                       {sid: round(SAMPLE_FRAMES * sample * MARGIN) for sid in shot_frames}, round(rest * MARGIN))


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
