"""timeline.otio: one clip per shot, crossfades as OTIO transitions, the shot's plan as metadata.

Beside it, when the OTIO adapter plugins are installed, timeline.xml (FCP 7 XML, for
Premiere / Resolve) and timeline.edl (CMX 3600). Every non-cut transition also gets a
marker on the incoming clip, which survives formats without transition objects.

Both editorial formats count in SMPTE timecode, which has no 12 or 16 fps (the rates of
animatics and of Wan's clips). Such a timeline is written to them at the nearest rate they
carry (:func:`editorial_rate`: 24 for 12 or 16 fps) in real time, not frame for frame: every
shot keeps its length in seconds and every cut lands on the nearest frame of that rate, so
the edit matches ``sequence.mp4`` and the shot files (unchanged, at the plan's rate) play at
100% speed in a sequence of that rate. An editor would rather conform a 16 fps clip into a
24 fps sequence than get no XML or EDL at all, or one that plays the shots 1.5 times too fast.
The retiming is stated in the files (an XML comment, EDL comment lines), in the .otio's
``metadata["daotai"]["editorial"]`` (and the manifest, through :func:`editorial_retime`).

Wipes (``wipe_left`` …) are OTIO transitions of type ``SMPTE_Wipe`` placed as crossfades are,
an Edge Wipe in FCP XML and a wipe event (``W001`` horizontal, ``W002`` vertical) in the EDL
(daotai.deliver.wipes); the direction is in the transition's metadata and the incoming clip's marker.

Crossfades follow the sequence exactly: a k-frame crossfade overlaps the last k frames of
the outgoing shot; OTIO models that by trimming the outgoing clip by the transition's
``out_offset`` and the incoming clip by its ``in_offset`` (the trims are the handles the
dissolve uses), so the timeline's duration equals ``sequence.mp4``'s.

When the render has sound, two audio tracks follow the picture: A1 holds the shots' own sound
(a clip per shot that has some, referencing the shot file, trimmed and dissolved exactly like
its picture; a gap elsewhere) and A2 the soundtrack, placed at its offset and cut at the end of
the picture. Timelines of silent renders have the one video track, as before.

Each line of dialogue is a marker on its shot's clip over the frames its subtitle shows
(daotai.deliver.subtitles): named ``MIA: Where were you?``, the speaker, the character id, the
line and its language in ``metadata["daotai"]["dialogue"]``. FCP XML carries them as clip
markers, the EDL as locators (``* LOC:``, which the format writes in capitals).

Each clip's ``metadata["daotai"]["camera"]`` holds the shot's camera: the move as the script
asked it (type, motion, rotate, fov, fov_end, …, as before), the lens (``fov_deg`` and
``focal_length_mm`` at the first and last frame, on a 24 mm-high sensor as the USD cameras use),
the trajectory as key frames (``trajectory``: frame numbers, positions in metres, rotations as
unit quaternions w x y z, vertical fov; world axes y up, OpenGL camera axes: x right, y up, looking
down -z) and, for renders, ``files``: the shot's camera files relative to the timeline (pose
file, camera-to-world JSON, USD). Key frames are chosen so that interpolating between them
(positions and fov linearly, rotations by slerp; :func:`camera_at`) gives every frame of the plan
within KEY_POSITION_M and KEY_ANGLE_DEG: a straight dolly needs two, a handheld shake many.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import opentimelineio as otio

from daotai.deliver.subtitles import Cue, sequence_cues
from daotai.deliver.wipes import edl_wipe_codes, wipe_transition
from daotai.files import atomic_write_text
from daotai.plan.layout import CAMERA_ENDINGS, EDITORIAL_FILES, audio_edl_name
from daotai.plan.model import Plan, ShotPlan
from daotai.script.vocab import OVERLAPPING_TRANSITIONS, WIPE_DIRECTIONS

log = logging.getLogger("daotai.timeline")

# A key frame is added where interpolation would miss a frame's position or its rotation or fov by
# more than these: 0.02 deg is a third of a pixel on a 1080-line picture with a 60 deg fov. Measured
# on examples/all_moves.json (14 shots of 48 frames): 334 key frames of 672 (a static shot 2, an
# eased pan 31, a handheld shake 47); 1 mm / 0.01 deg would keep 441, 5 mm / 0.05 deg 224.
KEY_POSITION_M = 0.002
KEY_ANGLE_DEG = 0.02
SENSOR_HEIGHT_MM = 24.0  # the focal length in metadata is for a full-frame sensor's height (as in the USD files)
POSITION_DIGITS = 6  # metres: micrometres, far below KEY_POSITION_M
QUATERNION_DIGITS = 8


def _quaternion(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z), w >= 0, of a 3x3 rotation matrix."""
    m = rotation
    trace = m[0, 0] + m[1, 1] + m[2, 2]
    if trace > 0:
        r = math.sqrt(1.0 + trace) * 2
        q = [0.25 * r, (m[2, 1] - m[1, 2]) / r, (m[0, 2] - m[2, 0]) / r, (m[1, 0] - m[0, 1]) / r]
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        r = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = [(m[2, 1] - m[1, 2]) / r, 0.25 * r, (m[0, 1] + m[1, 0]) / r, (m[0, 2] + m[2, 0]) / r]
    elif m[1, 1] > m[2, 2]:
        r = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = [(m[0, 2] - m[2, 0]) / r, (m[0, 1] + m[1, 0]) / r, 0.25 * r, (m[1, 2] + m[2, 1]) / r]
    else:
        r = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = [(m[1, 0] - m[0, 1]) / r, (m[0, 2] + m[2, 0]) / r, (m[1, 2] + m[2, 1]) / r, 0.25 * r]
    q = np.array(q) / np.linalg.norm(q)
    return -q if q[0] < 0 else q


def quaternion_matrix(q: Iterable[float]) -> np.ndarray:
    """3x3 rotation of a unit quaternion (w, x, y, z)."""
    w, x, y, z = np.asarray(list(q), dtype=np.float64) / np.linalg.norm(list(q))
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _slerp(a: np.ndarray, b: np.ndarray, t: float) -> np.ndarray:
    """Spherical interpolation of unit quaternions (the short way round)."""
    dot = float(a @ b)
    if dot < 0:
        b, dot = -b, -dot
    if dot > 0.9995:
        q = a + t * (b - a)
        return q / np.linalg.norm(q)
    angle = math.acos(dot)
    return (math.sin((1 - t) * angle) * a + math.sin(t * angle) * b) / math.sin(angle)


def _quaternion_angle_deg(a: np.ndarray, b: np.ndarray) -> float:
    return math.degrees(2 * math.acos(min(1.0, abs(float(a @ b)))))


def _interpolate(frames: list[int], positions: np.ndarray, quats: np.ndarray, fovs: np.ndarray,
                 frame: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Position (3,), quaternion (4,) and fov at ``frame`` between key frames (clamped at the ends)."""
    if frame <= frames[0]:
        return positions[0], quats[0], float(fovs[0])
    if frame >= frames[-1]:
        return positions[-1], quats[-1], float(fovs[-1])
    k = int(np.searchsorted(frames, frame, side="right")) - 1
    t = (frame - frames[k]) / (frames[k + 1] - frames[k])
    return ((1 - t) * positions[k] + t * positions[k + 1], _slerp(quats[k], quats[k + 1], t),
            float((1 - t) * fovs[k] + t * fovs[k + 1]))


def _key_frames(positions: np.ndarray, quats: np.ndarray, fovs: np.ndarray) -> list[int]:
    """The fewest frames (greedy, worst miss first) that interpolate every frame within the bounds."""
    keys = [0, len(positions) - 1] if len(positions) > 1 else [0]
    while True:
        worst, worst_frame = 0.0, None
        for i in range(len(positions)):
            if i in keys:
                continue
            p, q, f = _interpolate(keys, positions[keys], quats[keys], fovs[keys], i)
            miss = max(float(np.linalg.norm(p - positions[i])) / KEY_POSITION_M,
                       _quaternion_angle_deg(q, quats[i]) / KEY_ANGLE_DEG, abs(f - fovs[i]) / KEY_ANGLE_DEG)
            if miss > max(worst, 1.0):
                worst, worst_frame = miss, i
        if worst_frame is None:
            return keys
        keys = sorted([*keys, worst_frame])


def focal_length_mm(fov_deg: float) -> float:
    """Focal length (mm) of a vertical fov on a SENSOR_HEIGHT_MM-high sensor."""
    return SENSOR_HEIGHT_MM / (2 * math.tan(math.radians(fov_deg) / 2))


def camera_metadata(shot: ShotPlan, files: Mapping[str, str] | None = None) -> dict[str, Any]:
    """A clip's ``camera`` metadata: the move, the lens, the key-framed trajectory, the camera files."""
    matrices = np.stack([np.reshape(c.cam_to_world, (4, 4)) for c in shot.cameras]).astype(np.float64)  # (F, 4, 4)
    positions = matrices[:, :3, 3]  # (F, 3) metres, world
    quats = np.stack([_quaternion(m[:3, :3]) for m in matrices])  # (F, 4) w x y z
    for i in range(1, len(quats)):  # one hemisphere along the shot, so interpolation takes the short way
        if quats[i] @ quats[i - 1] < 0:
            quats[i] = -quats[i]
    fovs = np.array([c.fov for c in shot.cameras], dtype=np.float64)  # (F,) vertical, degrees
    keys = _key_frames(positions, quats, fovs)
    meta: dict[str, Any] = {
        **shot.move.model_dump(mode="json"),
        "fov_deg": [round(float(fovs[0]), 4), round(float(fovs[-1]), 4)],
        "focal_length_mm": [round(focal_length_mm(fovs[0]), 4), round(focal_length_mm(fovs[-1]), 4)],
        "sensor_height_mm": SENSOR_HEIGHT_MM,
        "trajectory": {
            "axes": "world: metres, y up; camera: x right, y up, looking down -z (OpenGL)",
            "interpolation": "position and fov linear, rotation slerp, between key frames",
            "tolerance": {"position_m": KEY_POSITION_M, "angle_deg": KEY_ANGLE_DEG},
            "frames": keys,
            "position": [[round(float(v), POSITION_DIGITS) for v in positions[k]] for k in keys],
            "rotation_wxyz": [[round(float(v), QUATERNION_DIGITS) for v in quats[k]] for k in keys],
            "fov_deg": [round(float(fovs[k]), POSITION_DIGITS) for k in keys],
        },
    }
    if files:
        meta["files"] = dict(files)
    return meta


def camera_at(camera: Mapping[str, Any], frame: float) -> tuple[np.ndarray, float]:
    """The cam_to_world (4, 4) and vertical fov (degrees) at ``frame`` from a clip's camera metadata."""
    trajectory = camera["trajectory"]
    position, quat, fov = _interpolate(list(trajectory["frames"]), np.asarray(trajectory["position"], float),
                                       np.asarray(trajectory["rotation_wxyz"], float),
                                       np.asarray(trajectory["fov_deg"], float), frame)
    matrix = np.eye(4)
    matrix[:3, :3], matrix[:3, 3] = quaternion_matrix(quat), position
    return matrix, fov


# The ending of each camera file (the layout's) → its key in a clip's camera metadata.
CAMERA_FILE_KINDS = {CAMERA_ENDINGS["camera_pose"]: "pose", CAMERA_ENDINGS["camera_json"]: "c2w",
                     CAMERA_ENDINGS["camera_usd"]: "usd"}


def camera_files_by_shot(plan: Plan, written: Iterable[str | Path], root: str | Path) -> dict[str, dict[str, str]]:
    """Shot id -> kind (pose, c2w, usd) -> path relative to ``root`` (posix) of the camera files written."""
    ids = {shot.shot_id for shot in plan.shots}
    out: dict[str, dict[str, str]] = {}
    for path in written:
        path = Path(path)
        for suffix, kind in CAMERA_FILE_KINDS.items():
            shot_id = path.name[: -len(suffix)] if path.name.endswith(suffix) else None
            if shot_id in ids:
                out.setdefault(shot_id, {})[kind] = path.resolve().relative_to(Path(root).resolve()).as_posix()
    return out


def _shot_metadata(shot: ShotPlan, camera_files: Mapping[str, str] | None = None) -> dict:
    return {
        "shot_id": shot.shot_id,
        "framing": shot.framing,
        "angle": shot.angle,
        "subject": shot.subject,
        "characters": list(shot.characters),
        "camera": camera_metadata(shot, camera_files),
        "motion_code": shot.motion_code.model_dump(mode="json"),
        "duration_s": shot.duration_s,
        "frames": shot.frames,
        "seed": shot.seed,
        "prompt": shot.prompt,
        "negative_prompt": shot.negative_prompt,
        "action": shot.action,
        "transition_in": shot.transition.model_dump(mode="json"),
    }


def _transition_marker(shot: ShotPlan, head: int, rate: float) -> otio.schema.Marker:
    """A marker at the incoming clip's first visible frame naming the transition into it."""
    kind, frames = shot.transition.type, shot.transition.frames
    return otio.schema.Marker(
        name=f"{kind} into {shot.shot_id} ({frames} frames)",
        marked_range=otio.opentime.TimeRange(
            otio.opentime.RationalTime(head, rate), otio.opentime.RationalTime(1, rate)
        ),
        color=otio.schema.MarkerColor.YELLOW,
        metadata={"daotai": {"transition": kind, "frames": frames}},
    )


def _dialogue_marker(cue: Cue, shot: ShotPlan, rate: float) -> otio.schema.Marker:
    """A marker over the frames a line of dialogue is subtitled on, in the clip's source time
    (the shot file's frames: a sequence frame less the shot's ``start_frame``)."""
    return otio.schema.Marker(
        name=cue.label,
        marked_range=otio.opentime.TimeRange(
            otio.opentime.RationalTime(cue.start - shot.start_frame, rate),
            otio.opentime.RationalTime(cue.end - cue.start, rate),
        ),
        color=otio.schema.MarkerColor.CYAN,
        metadata={"daotai": {"dialogue": {"speaker": cue.speaker, "character": cue.character, "line": cue.line,
                                          "language": cue.language, "shot_id": cue.shot_id,
                                          "line_index": cue.line_index}}},
    )


@dataclass(frozen=True)
class TimelineSound:
    """What the timeline's audio tracks hold: shots with their own sound, and the soundtrack file."""

    shots_with_sound: frozenset[str] = field(default_factory=frozenset)
    soundtrack: str | None = None  # path or URL of the soundtrack file
    soundtrack_duration_s: float = 0.0
    soundtrack_offset_s: float = 0.0
    soundtrack_gain_db: float = 0.0
    muted: frozenset[str] = field(default_factory=frozenset)
    gains_db: dict[str, float] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return bool(self.shots_with_sound) or self.soundtrack is not None


def build_timeline(plan: Plan, shot_files: dict[str, str], sound: TimelineSound | None = None,
                   camera_files: Mapping[str, Mapping[str, str]] | None = None) -> otio.schema.Timeline:
    """An OTIO timeline of the plan's shots referencing the shot files (relative paths), with audio tracks
    when ``sound`` has any and each shot's camera files (kind -> relative path) from ``camera_files``
    (module doc)."""
    rate = float(Fraction(*plan.fps_fraction))
    timeline = otio.schema.Timeline(name=plan.title)
    timeline.metadata["daotai"] = {
        "script_hash": plan.script_hash,
        "fps": plan.fps,
        "size": [plan.width, plan.height],
        "scene": plan.scene.name,
        "total_frames": plan.total_frames,
    }
    track = otio.schema.Track(name="V1", kind=otio.schema.TrackKind.Video)
    timeline.tracks.append(track)
    shots = list(plan.shots)
    cues: dict[str, list[Cue]] = {}
    for cue in sequence_cues(plan):  # the subtitles' timing: markers and subtitles agree frame for frame
        cues.setdefault(cue.shot_id, []).append(cue)
    # trims[i] = (frames cut from the head, frames cut from the tail) of shot i
    trims = [[0, 0] for _ in shots]
    for i, shot in enumerate(shots):
        if shot.transition.type in OVERLAPPING_TRANSITIONS and i > 0:
            k = shot.transition.frames
            incoming, outgoing = k // 2, k - k // 2
            trims[i - 1][1] += outgoing
            trims[i][0] += incoming
    for i, shot in enumerate(shots):
        if i > 0 and shot.transition.type == "crossfade":
            k = shot.transition.frames
            track.append(
                otio.schema.Transition(
                    name=f"dissolve into {shot.shot_id}",
                    transition_type=otio.schema.TransitionTypes.SMPTE_Dissolve,
                    in_offset=otio.opentime.RationalTime(k // 2, rate),
                    out_offset=otio.opentime.RationalTime(k - k // 2, rate),
                )
            )
        elif i > 0 and shot.transition.type in WIPE_DIRECTIONS:
            track.append(wipe_transition(shot.transition.type, shot.shot_id, shot.transition.frames, rate))
        available = otio.opentime.TimeRange(
            otio.opentime.RationalTime(0, rate), otio.opentime.RationalTime(shot.frames, rate)
        )
        head, tail = trims[i]
        clip = otio.schema.Clip(
            name=shot.shot_id,
            media_reference=otio.schema.ExternalReference(target_url=shot_files[shot.shot_id], available_range=available),
            source_range=otio.opentime.TimeRange(
                otio.opentime.RationalTime(head, rate), otio.opentime.RationalTime(shot.frames - head - tail, rate)
            ),
        )
        clip.metadata["daotai"] = _shot_metadata(shot, (camera_files or {}).get(shot.shot_id))
        if i > 0 and shot.transition.type != "cut":
            clip.markers.append(_transition_marker(shot, head, rate))
        clip.markers.extend(_dialogue_marker(cue, shot, rate) for cue in cues.get(shot.shot_id, ()))
        if shot.transition.type == "fade":
            k = shot.transition.frames
            clip.effects.append(otio.schema.Effect(name="fade in", effect_name="FadeIn", metadata={"frames": k}))
            if i > 0:
                track[-1].effects.append(otio.schema.Effect(name="fade out", effect_name="FadeOut", metadata={"frames": k}))
        track.append(clip)
    if plan.fade_out is not None:  # the film's closing fade to black, on the last clip
        track[-1].effects.append(otio.schema.Effect(name="fade out", effect_name="FadeOut",
                                                    metadata={"frames": plan.fade_out.frames, "closing": True}))
    if sound is not None and sound.any:
        timeline.tracks.append(_shot_audio_track(plan, shot_files, trims, sound, rate))
        timeline.tracks.append(_soundtrack_track(plan, sound, rate))
    return timeline


def _shot_audio_track(plan: Plan, shot_files: dict[str, str], trims: list[list[int]], sound: TimelineSound,
                      rate: float) -> otio.schema.Track:
    """A1: each shot's own sound where it has some, cut and dissolved like its picture; gaps elsewhere."""
    track = otio.schema.Track(name="A1 shot audio", kind=otio.schema.TrackKind.Audio)
    previous_is_clip = False
    for i, shot in enumerate(plan.shots):
        head, tail = trims[i]
        length = otio.opentime.RationalTime(shot.frames - head - tail, rate)
        has = shot.shot_id in sound.shots_with_sound
        if not has:
            track.append(otio.schema.Gap(source_range=otio.opentime.TimeRange(duration=length)))
            previous_is_clip = False
            continue
        if i > 0 and shot.transition.type in OVERLAPPING_TRANSITIONS and previous_is_clip:  # a wipe's sound crossfades
            k = shot.transition.frames
            track.append(otio.schema.Transition(
                name=f"crossfade into {shot.shot_id}", transition_type=otio.schema.TransitionTypes.SMPTE_Dissolve,
                in_offset=otio.opentime.RationalTime(k // 2, rate), out_offset=otio.opentime.RationalTime(k - k // 2, rate),
                metadata={"daotai": {"curve": "equal_power"}}))
        available = otio.opentime.TimeRange(otio.opentime.RationalTime(0, rate), otio.opentime.RationalTime(shot.frames, rate))
        clip = otio.schema.Clip(
            name=f"{shot.shot_id} audio",
            media_reference=otio.schema.ExternalReference(target_url=shot_files[shot.shot_id], available_range=available),
            source_range=otio.opentime.TimeRange(otio.opentime.RationalTime(head, rate), length),
        )
        clip.metadata["daotai"] = {"shot_id": shot.shot_id, "mute": shot.shot_id in sound.muted,
                                   "gain_db": sound.gains_db.get(shot.shot_id, 0.0)}
        clip.enabled = shot.shot_id not in sound.muted  # a muted shot's sound is in the timeline, switched off
        if shot.transition.type == "fade":
            clip.effects.append(otio.schema.Effect(name="fade in", effect_name="AudioFadeIn",
                                                   metadata={"frames": shot.transition.frames}))
        if i + 1 < len(plan.shots) and plan.shots[i + 1].transition.type == "fade":
            clip.effects.append(otio.schema.Effect(name="fade out", effect_name="AudioFadeOut",
                                                   metadata={"frames": plan.shots[i + 1].transition.frames}))
        if i + 1 == len(plan.shots) and plan.fade_out is not None:  # the film's sound fades with its picture
            clip.effects.append(otio.schema.Effect(name="fade out", effect_name="AudioFadeOut",
                                                   metadata={"frames": plan.fade_out.frames, "closing": True}))
        track.append(clip)
        previous_is_clip = True
    return track


def _soundtrack_track(plan: Plan, sound: TimelineSound, rate: float) -> otio.schema.Track:
    """A2: the soundtrack from its offset to the end of the picture (empty without one)."""
    track = otio.schema.Track(name="A2 soundtrack", kind=otio.schema.TrackKind.Audio)
    if sound.soundtrack is None:
        return track
    total = plan.total_frames
    begin = max(0, round(sound.soundtrack_offset_s * rate))
    skip = max(0, round(-sound.soundtrack_offset_s * rate))
    available_frames = int(sound.soundtrack_duration_s * rate)
    length = min(available_frames - skip, total - begin)
    if begin > 0:
        track.append(otio.schema.Gap(source_range=otio.opentime.TimeRange(
            duration=otio.opentime.RationalTime(min(begin, total), rate))))
    if length > 0:
        clip = otio.schema.Clip(
            name="soundtrack",
            media_reference=otio.schema.ExternalReference(
                target_url=sound.soundtrack,
                available_range=otio.opentime.TimeRange(otio.opentime.RationalTime(0, rate),
                                                        otio.opentime.RationalTime(available_frames, rate))),
            source_range=otio.opentime.TimeRange(otio.opentime.RationalTime(skip, rate),
                                                 otio.opentime.RationalTime(length, rate)),
        )
        clip.metadata["daotai"] = {"gain_db": sound.soundtrack_gain_db, "offset_s": sound.soundtrack_offset_s}
        if plan.fade_out is not None and begin + length == total:  # the music fades out with the film
            clip.effects.append(otio.schema.Effect(name="fade out", effect_name="AudioFadeOut",
                                                   metadata={"frames": plan.fade_out.frames, "closing": True}))
        track.append(clip)
    return track


# Editorial exchange formats written beside the .otio when their OTIO adapter plugin is
# installed (otio-fcp-adapter, otio-cmx3600-adapter): suffix → adapter name.
EDITORIAL_FORMATS = {EDITORIAL_FILES["timeline_xml"]: "fcp_xml", EDITORIAL_FILES["timeline_edl"]: "cmx_3600"}
# Rates a timeline at a rate SMPTE timecode lacks is written at in those formats: the whole-number
# timecode rates every editing program takes (OTIO's own nearest rate for 16 fps is 23.976, a
# broadcast rate an animatic has no reason to use).
EDITORIAL_RATES = (24, 25, 30, 48, 50, 60)
# The rates SMPTE timecode counts in, whole and NTSC (n*1000/1001). Written here rather than asked
# of OTIO, whose answer moved between releases (0.17 takes 12 fps, 0.18 refuses it), so the files
# a render writes do not depend on the OTIO installed.
SMPTE_RATES = frozenset([Fraction(rate) for rate in EDITORIAL_RATES]
                        + [Fraction(rate * 1000, 1001) for rate in (24, 30, 48, 60)])


@dataclass(frozen=True)
class EditorialRetime:
    """How a timeline is written to FCP XML and EDL when its rate has no SMPTE timecode."""

    source_fps: Fraction  # the plan's rate: the shot files' and the .otio's
    fps: Fraction  # the rate the editorial files count in

    @property
    def max_shift_s(self) -> float:
        """The furthest a cut moves: half a frame at the editorial rate."""
        return 0.5 / float(self.fps)

    def note(self) -> str:
        """What an editor reads in the files and the manifest."""
        src, dst = f"{float(self.source_fps):g}", f"{float(self.fps):g}"
        return (f"Shots run at {src} fps, a rate SMPTE timecode (FCP XML, EDL) does not carry: this timeline "
                f"is written at {dst} fps in real time. Each shot keeps its length in seconds and each cut "
                f"lands on the nearest {dst} fps frame (at most {self.max_shift_s * 1000:.0f} ms off). The shot "
                f"files are unchanged at {src} fps: cut them into a {dst} fps sequence at 100% speed.")

    def to_dict(self) -> dict[str, Any]:
        return {"fps": float(self.fps), "source_fps": float(self.source_fps), "formats": sorted(EDITORIAL_FORMATS),
                "note": self.note()}


def editorial_rate(fps: Fraction) -> Fraction:
    """The rate FCP XML and EDL count in: ``fps`` when SMPTE timecode has it, else the nearest of
    EDITORIAL_RATES (the lower on a tie)."""
    if Fraction(fps) in SMPTE_RATES:
        return Fraction(fps)
    return Fraction(min(EDITORIAL_RATES, key=lambda rate: (abs(rate - fps), rate)))


def editorial_retime(plan: Plan) -> EditorialRetime | None:
    """The plan's editorial retiming, or None when its rate has SMPTE timecode."""
    fps = Fraction(*plan.fps_fraction)
    rate = editorial_rate(fps)
    return None if rate == fps else EditorialRetime(source_fps=fps, fps=rate)


def _at(time: otio.opentime.RationalTime, source: float, target: float) -> otio.opentime.RationalTime:
    """``time`` (counted at ``source``) on the nearest frame at ``target``."""
    return otio.opentime.RationalTime(round(time.value * target / source), target)


def _retime_markers(item: Any, source: float, target: float) -> None:
    for marker in getattr(item, "markers", []):
        start = _at(marker.marked_range.start_time, source, target)
        marker.marked_range = otio.opentime.TimeRange(start, _at(marker.marked_range.duration, source, target))


def retimed(timeline: otio.schema.Timeline, retime: EditorialRetime) -> otio.schema.Timeline:
    """A copy of ``timeline`` counted at ``retime.fps`` in real time: cut points (cumulative, so no
    drift) and trims on the nearest frame, media ranges rounded up so the trims stay inside them."""
    source, target = float(retime.source_fps), float(retime.fps)
    copy = timeline.deepcopy()
    for track in copy.tracks:
        position = 0  # frames at the source rate, where the next item starts on the track
        for item in track:
            if isinstance(item, otio.schema.Transition):
                item.in_offset = _at(item.in_offset, source, target)
                item.out_offset = _at(item.out_offset, source, target)
                continue
            length = item.source_range.duration.value
            start = round(position * target / source)
            end = round((position + length) * target / source)
            position += length
            first = _at(item.source_range.start_time, source, target)
            item.source_range = otio.opentime.TimeRange(first, otio.opentime.RationalTime(end - start, target))
            reference = getattr(item, "media_reference", None)
            if reference is not None and reference.available_range is not None:
                available = reference.available_range
                frames = math.ceil(available.duration.value * target / source)
                frames = max(frames, int(first.value) + end - start)
                reference.available_range = otio.opentime.TimeRange(_at(available.start_time, source, target),
                                                                     otio.opentime.RationalTime(frames, target))
            _retime_markers(item, source, target)
            for effect in item.effects:
                if "frames" in effect.metadata:
                    effect.metadata["frames"] = round(effect.metadata["frames"] * target / source)
    return copy


def _noted(text: str, adapter: str, retime: EditorialRetime) -> str:
    """``text`` (an adapter's output) with the retiming note in the format's own comment syntax."""
    if adapter == "fcp_xml":
        note = "<!-- " + retime.note().replace("--", "-") + " -->"
        if text.startswith("<?xml"):
            declaration, _, rest = text.partition("\n")
            return f"{declaration}\n{note}\n{rest}"
        return f"{note}\n{text}"
    if adapter == "cmx_3600":
        # comment lines belong to an event (a reader refuses them before the first one): the first event's
        lines = text.split("\n")
        at = next((i + 1 for i, line in enumerate(lines) if line[:3].isdigit()), len(lines))
        return "\n".join(lines[:at] + [f"* NOTE: {line}" for line in _wrapped(retime.note())] + lines[at:])
    return text


def _wrapped(text: str, width: int = 70) -> list[str]:
    import textwrap

    return textwrap.wrap(text, width)


def available_editorial_formats() -> dict[str, str]:
    """The EDITORIAL_FORMATS whose adapter is installed."""
    names = set(otio.adapters.available_adapter_names())
    return {suffix: name for suffix, name in EDITORIAL_FORMATS.items() if name in names}


def write_editorial(timeline: otio.schema.Timeline, base: str | Path,
                    retime: EditorialRetime | None = None) -> list[Path]:
    """FCP 7 XML and CMX 3600 EDL of the timeline at base.xml / base.edl (those available);
    ``retime``: the timeline's rate has no SMPTE timecode, write it at ``retime.fps`` (module doc)."""
    written = []
    if retime is not None:
        timeline = retimed(timeline, retime)
    for suffix, adapter in available_editorial_formats().items():
        target = Path(base).with_suffix(suffix)
        try:
            text = otio.adapters.write_to_string(timeline, adapter)
        except Exception as error:  # noqa: BLE001 - a third-party plugin; the .otio stays the record
            log.warning("%s not written: the %s adapter refused this timeline (%s)", target.name, adapter, error)
            continue
        if adapter == "cmx_3600":
            text = edl_wipe_codes(text, timeline)
        atomic_write_text(target, _noted(text, adapter, retime) if retime is not None else text)
        written.append(target)
        if adapter == "cmx_3600":
            written.extend(_audio_edls(timeline, target))
    return written


def _audio_edls(timeline: otio.schema.Timeline, video_edl: Path) -> list[Path]:
    """One CMX 3600 EDL per audio track holding clips (base.a1.edl, base.a2.edl): the format, and the
    adapter, carry one track per list, so the picture's EDL cannot hold the sound."""
    try:
        from otio_cmx3600_adapter.cmx_3600 import EDLWriter
    except ImportError:
        return []
    written = []
    audio = [t for t in timeline.tracks if t.kind == otio.schema.TrackKind.Audio]
    for number, track in enumerate(audio, start=1):
        if not any(isinstance(item, otio.schema.Clip) for item in track):
            continue
        target = video_edl.with_name(audio_edl_name(video_edl.stem, number))
        try:
            stack = otio.schema.Stack(children=[track.deepcopy()])
            writer = EDLWriter(tracks=stack, rate=track.duration().rate, style="avid")
            text = writer.get_content_for_track_at_index(0, title=f"{timeline.name} {track.name}")
        except Exception as error:  # noqa: BLE001 - a third-party plugin; the .otio stays the record
            log.warning("%s not written: the cmx_3600 adapter refused the track (%s)", target.name, error)
            continue
        atomic_write_text(target, text)
        written.append(target)
    return written


def write_timeline(plan: Plan, shot_files: dict[str, str], path: str | Path,
                   sound: TimelineSound | None = None,
                   camera_files: Mapping[str, Mapping[str, str]] | None = None) -> list[Path]:
    """Write the timeline as .otio JSON atomically, plus .xml / .edl beside it; returns the paths."""
    timeline = build_timeline(plan, shot_files, sound, camera_files)
    retime = editorial_retime(plan)
    if retime is not None:
        timeline.metadata["daotai"]["editorial"] = retime.to_dict()
    atomic_write_text(path, otio.adapters.write_to_string(timeline, "otio_json"))
    return [Path(path), *write_editorial(timeline, path, retime)]
