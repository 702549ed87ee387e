"""timeline.otio: one clip per shot, crossfades as OTIO transitions, the shot's plan as metadata.

Beside it, when the OTIO adapter plugins are installed, timeline.xml (FCP 7 XML, for
Premiere / Resolve) and timeline.edl (CMX 3600). Every non-cut transition also gets a
marker on the incoming clip, which survives formats without transition objects.

Crossfades follow the sequence exactly: a k-frame crossfade overlaps the last k frames of
the outgoing shot; OTIO models that by trimming the outgoing clip by the transition's
``out_offset`` and the incoming clip by its ``in_offset`` (the trims are the handles the
dissolve uses), so the timeline's duration equals ``sequence.mp4``'s.

When the render has sound, two audio tracks follow the picture: A1 holds the shots' own sound
(a clip per shot that has some, referencing the shot file, trimmed and dissolved exactly like
its picture; a gap elsewhere) and A2 the soundtrack, placed at its offset and cut at the end of
the picture. Timelines of silent renders have the one video track, as before.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import opentimelineio as otio

from daotai.files import atomic_write_text
from daotai.plan.model import Plan, ShotPlan

log = logging.getLogger("daotai.timeline")


def _shot_metadata(shot: ShotPlan) -> dict:
    return {
        "shot_id": shot.shot_id,
        "framing": shot.framing,
        "angle": shot.angle,
        "subject": shot.subject,
        "characters": list(shot.characters),
        "camera": shot.move.model_dump(mode="json"),
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


def build_timeline(plan: Plan, shot_files: dict[str, str], sound: TimelineSound | None = None) -> otio.schema.Timeline:
    """An OTIO timeline of the plan's shots referencing the shot files (relative paths), with audio tracks
    when ``sound`` has any (module doc)."""
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
    # trims[i] = (frames cut from the head, frames cut from the tail) of shot i
    trims = [[0, 0] for _ in shots]
    for i, shot in enumerate(shots):
        if shot.transition.type == "crossfade" and i > 0:
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
        clip.metadata["daotai"] = _shot_metadata(shot)
        if i > 0 and shot.transition.type != "cut":
            clip.markers.append(_transition_marker(shot, head, rate))
        if shot.transition.type == "fade":
            k = shot.transition.frames
            clip.effects.append(otio.schema.Effect(name="fade in", effect_name="FadeIn", metadata={"frames": k}))
            if i > 0:
                track[-1].effects.append(otio.schema.Effect(name="fade out", effect_name="FadeOut", metadata={"frames": k}))
        track.append(clip)
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
        if i > 0 and shot.transition.type == "crossfade" and previous_is_clip:
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
        track.append(clip)
    return track


# Editorial exchange formats written beside the .otio when their OTIO adapter plugin is
# installed (otio-fcp-adapter, otio-cmx3600-adapter): suffix → adapter name.
EDITORIAL_FORMATS = {".xml": "fcp_xml", ".edl": "cmx_3600"}


def available_editorial_formats() -> dict[str, str]:
    """The EDITORIAL_FORMATS whose adapter is installed."""
    names = set(otio.adapters.available_adapter_names())
    return {suffix: name for suffix, name in EDITORIAL_FORMATS.items() if name in names}


def write_editorial(timeline: otio.schema.Timeline, base: str | Path) -> list[Path]:
    """FCP 7 XML and CMX 3600 EDL of the timeline at base.xml / base.edl (those available)."""
    written = []
    for suffix, adapter in available_editorial_formats().items():
        target = Path(base).with_suffix(suffix)
        try:
            text = otio.adapters.write_to_string(timeline, adapter)
        except Exception as error:  # noqa: BLE001 - a third-party plugin; the .otio stays the record
            # e.g. CMX 3600 only knows SMPTE timecode rates (24, 25, 30, …): a 12 fps animatic has no EDL
            log.warning("%s not written: the %s adapter refused this timeline (%s)", target.name, adapter, error)
            continue
        atomic_write_text(target, text)
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
        target = video_edl.with_name(f"{video_edl.stem}.a{number}.edl")
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
                   sound: TimelineSound | None = None) -> list[Path]:
    """Write the timeline as .otio JSON atomically, plus .xml / .edl beside it; returns the paths."""
    timeline = build_timeline(plan, shot_files, sound)
    atomic_write_text(path, otio.adapters.write_to_string(timeline, "otio_json"))
    return [Path(path), *write_editorial(timeline, path)]
