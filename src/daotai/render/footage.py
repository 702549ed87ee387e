"""User footage as a shot's motion and camera reference: checked before a render, read at the model's frame times.

A shot's ``reference_video`` (a phone rehearsal, a rough cut, an old take) names a file and a
stretch of it, ``start``–``end`` seconds. The backends that follow footage (``h3`` takes it as
ref2va's video reference, ``wan-vace`` as its control video) use it where they would use the
previz render; the stretch is laid over the shot's duration, so frame ``i`` of a shot of ``D``
seconds shows the file at ``start + t_i · (end − start) / D``.

Before any shot renders, :func:`check_plan_footage` opens every named file with PyAV and
decodes its stretch: the file must exist, hold a video stream, stay within the size limits and
last until ``end``. Every problem is a :class:`~daotai.errors.ScriptError` issue naming the
field (``shots[2].reference_video.path``), the value and the rule, all of them at once.

Frames are taken as the file shows them (a phone's rotation tag is applied), cropped to the
shot's aspect ratio about their centre (the frame is filled, never letterboxed) and resized.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from daotai.errors import Issue, ScriptError
from daotai.events import Notice
from daotai.plan.model import FootagePlan, Plan, ShotPlan
from daotai.render.spec import BackendSpec

MAX_FOOTAGE_BYTES = 4 * 1024**3  # a phone's 4K minute is ~0.4 GiB: room for long takes, not for a feature film
MAX_FOOTAGE_PIXELS = 4096 * 2160  # DCI 4K: larger frames cost decoding time and gain nothing at the model's canvas
MAX_FOOTAGE_SECONDS = 3 * 3600.0  # the longest file whose stretch a shot may name
# A stretch must be covered to within half of one of the file's frames (timestamps round).
COVER_TOLERANCE_FRAMES = 0.5
TIME_EPSILON_S = 1e-4  # a wanted time this close before a frame's timestamp is that frame (timestamps are rounded)


@dataclass(frozen=True)
class FootageInfo:
    """What opening and decoding a footage file found."""

    path: Path
    width: int  # as shown (after the rotation tag)
    height: int
    fps: float
    seconds: float  # up to the end of the last decoded frame of the stretch (or of the file)
    codec: str
    rotation: int  # degrees the file's display matrix turns the picture

    def describe(self) -> str:
        """One line for notices and the manifest."""
        turned = f", rotated {self.rotation}°" if self.rotation else ""
        return f"{self.path.name}: {self.width}x{self.height} {self.codec} at {self.fps:g} fps{turned}"


def footage_field(shot: ShotPlan, key: str = "path") -> str:
    """The JSON path of a shot's reference video field, as the script writes it."""
    return f"shots[{shot.index}].reference_video.{key}"


def footage_file(footage: FootagePlan, root: Path | None) -> Path:
    """The file a shot's footage names: absolute, or relative to the script's folder (``root``)."""
    path = Path(footage.path).expanduser()
    return path if path.is_absolute() or root is None else root / path


def footage_times(count: int, fps: float, shot_seconds: float, start: float, end: float) -> list[float]:
    """Seconds into the file of ``count`` frames at ``fps`` on the shot's clock (the stretch laid over the shot)."""
    speed = (end - start) / shot_seconds
    return [min(start + index / fps * speed, end) for index in range(count)]


def _rotation(stream: Any, frame: Any | None = None) -> int:
    """Degrees (0, 90, 180, 270) a file's display matrix turns its picture, counter-clockwise."""
    value = getattr(frame, "rotation", None) if frame is not None else None
    if value is None:
        value = getattr(getattr(stream, "codec_context", None), "rotation", 0) or 0
    return int(round(float(value))) % 360


def _shown(rgb: np.ndarray, rotation: int) -> np.ndarray:
    """A decoded (H, W, 3) picture as the file is meant to be shown (its rotation tag applied)."""
    turns = (rotation // 90) % 4
    return np.ascontiguousarray(np.rot90(rgb, turns)) if turns else rgb


def probe_footage(path: Path, start: float, end: float, where: str, *, max_bytes: int = MAX_FOOTAGE_BYTES,
                  max_pixels: int = MAX_FOOTAGE_PIXELS) -> tuple[FootageInfo | None, list[Issue]]:
    """Open and decode the stretch ``start``–``end`` of a footage file; (what was found, every broken rule).

    ``where`` is the JSON path of the file's field (issues about the stretch name its ``end``).
    """
    if not path.is_file():
        return None, [Issue(where, str(path), "is not a file (relative paths are read beside the script)")]
    size = path.stat().st_size
    if size > max_bytes:
        return None, [Issue(where, str(path), f"is {size} bytes; a reference video may be at most {max_bytes} bytes")]
    import av

    try:
        with av.open(str(path)) as container:
            if not container.streams.video:
                return None, [Issue(where, str(path), "holds no video stream")]
            stream = container.streams.video[0]
            stream.thread_type = "AUTO"
            width, height = stream.codec_context.width, stream.codec_context.height
            if width * height > max_pixels:
                return None, [Issue(where, str(path), f"is {width}x{height}; a reference video may have at most "
                                                      f"{max_pixels} pixels a frame")]
            rate = stream.average_rate or stream.guessed_rate or stream.base_rate
            fps = float(rate) if rate else 0.0
            stated = float(container.duration or 0) / 1e6
            if stated > MAX_FOOTAGE_SECONDS:
                return None, [Issue(where, str(path), f"lasts {stated:g} s; a reference video may last at most "
                                                      f"{MAX_FOOTAGE_SECONDS:g} s")]
            last_end, decoded, rotation, shown = 0.0, 0, 0, (width, height)
            if start > 1.0:
                container.seek(int(max(0.0, start - 1.0) / stream.time_base), stream=stream, backward=True)
            for frame in container.decode(stream):
                if frame.pts is None:
                    continue
                at = float(frame.pts * stream.time_base)
                duration = float(frame.duration * stream.time_base) if frame.duration else (1.0 / fps if fps else 0.0)
                if decoded == 0:
                    rotation = _rotation(stream, frame)
                    shown = (height, width) if rotation in (90, 270) else (width, height)
                decoded += 1
                last_end = max(last_end, at + duration)
                if last_end >= end:
                    break
    except (av.error.FFmpegError, OSError, ValueError) as exc:  # PyAV raises many kinds for a file it cannot read
        return None, [Issue(where, str(path), f"could not be decoded as video ({type(exc).__name__})")]
    if decoded == 0:
        return None, [Issue(where, str(path), "holds no decodable video frames")]
    info = FootageInfo(path, shown[0], shown[1], fps, last_end, stream.codec_context.name, rotation)
    tolerance = COVER_TOLERANCE_FRAMES / fps if fps else 0.0
    if last_end + tolerance < end:
        end_where = where.rsplit(".", 1)[0] + ".end"
        return info, [Issue(end_where, end, f"is past the end of {path.name} ({last_end:g} s of video): the stretch "
                                            "must lie within the file")]
    return info, []


def check_plan_footage(plan: Plan, root: Path | None) -> dict[str, FootageInfo]:
    """Every shot's footage opened and its stretch decoded, before any render; ScriptError lists every problem."""
    found: dict[str, FootageInfo] = {}
    issues: list[Issue] = []
    for shot in plan.shots:
        footage = shot.reference_video
        if footage is None:
            continue
        info, problems = probe_footage(footage_file(footage, root), footage.start_s, footage.end_s, footage_field(shot))
        issues += problems
        if info is not None and not problems:
            found[shot.shot_id] = info
    if issues:
        raise ScriptError(issues)
    return found


def footage_notices(plan: Plan, spec: BackendSpec, root: Path | None) -> list[Notice]:
    """Before any work: check the footage of a backend that follows it (ScriptError), or say that it is not used."""
    named = [s for s in plan.shots if s.reference_video is not None]
    if not named:
        return []
    if not spec.footage:
        return [Notice("warning", f"backend {spec.name!r} does not follow reference footage: "
                                  f"{', '.join(s.shot_id for s in named)} render from the plan's camera and blocking")]
    found = check_plan_footage(plan, root)
    return [Notice("info", f"reference footage {found[s.shot_id].describe()}, "
                           f"{s.reference_video.start_s:g}–{s.reference_video.end_s:g} s", s.shot_id)
            for s in named if s.reference_video is not None]


def fill_crop(rgb: np.ndarray, width: int, height: int) -> np.ndarray:
    """The largest centred part of an (H, W, 3) picture with the aspect ratio width:height (filled, no bars)."""
    h, w = rgb.shape[:2]
    if w * height > h * width:  # wider than wanted: trim the sides
        keep = max(1, round(h * width / height))
        left = (w - keep) // 2
        return rgb[:, left:left + keep]
    keep = max(1, round(w * height / width))
    top = (h - keep) // 2
    return rgb[top:top + keep]


def read_footage(path: Path, times: list[float], width: int, height: int) -> np.ndarray:
    """The file's pictures shown at ``times`` (seconds, ascending), filled and resized: (N, height, width, 3) uint8.

    Each time takes the last frame that starts at or before it (as a player shows it).
    """
    import av

    from daotai.render.neural.retime import resize_rgb

    out: list[np.ndarray | None] = [None] * len(times)
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        if times and times[0] > 1.0:
            container.seek(int(max(0.0, times[0] - 1.0) / stream.time_base), stream=stream, backward=True)
        held: np.ndarray | None = None
        wanted = 0
        for frame in container.decode(stream):
            if frame.pts is None:
                continue
            at = float(frame.pts * stream.time_base)
            while wanted < len(times) and times[wanted] + TIME_EPSILON_S < at:
                if held is None:  # the stretch starts before the first frame: show the first one
                    break
                out[wanted] = held
                wanted += 1
            if wanted >= len(times):
                break
            rgb = _shown(frame.to_ndarray(format="rgb24"), _rotation(stream, frame))  # (H, W, 3) uint8
            held = resize_rgb(np.ascontiguousarray(fill_crop(rgb, width, height)), width, height)
        if held is None:
            raise ScriptError([Issue("reference_video.path", str(path), "holds no decodable video frames")])
        for index in range(wanted, len(times)):  # past the last frame: hold it (the check allowed half a frame)
            out[index] = held
    return np.stack(out)  # type: ignore[arg-type]


def shot_footage(plan: Plan, shot: ShotPlan, root: Path | None, count: int, fps: float, width: int,
                 height: int) -> np.ndarray:
    """The shot's footage as ``count`` frames at ``fps`` on the shot's clock: (count, height, width, 3) uint8."""
    footage = shot.reference_video
    if footage is None:
        raise ValueError(f"{shot.shot_id} names no reference video")
    times = footage_times(count, fps, shot.duration_s, footage.start_s, footage.end_s)
    return read_footage(footage_file(footage, root), times, width, height)


def describe_footage(shot: ShotPlan, count: int, fps: float) -> str:
    """How a backend uses the shot's footage, for its notice (and so the manifest)."""
    footage = shot.reference_video
    assert footage is not None
    seconds = footage.end_s - footage.start_s
    speed = seconds / shot.duration_s
    pace = "" if abs(speed - 1.0) < 1e-6 else f", played at {speed:.2f}x to fill the shot's {shot.duration_s:g} s"
    return (f"footage {footage.path} {footage.start_s:g}–{footage.end_s:g} s ({count} frames at {fps:g} fps{pace}; "
            "centre-filled to the shot's aspect)")
