"""timeline.otio: one clip per shot, crossfades as OTIO transitions, the shot's plan as metadata.

Beside it, when the OTIO adapter plugins are installed, timeline.xml (FCP 7 XML, for
Premiere / Resolve) and timeline.edl (CMX 3600). Every non-cut transition also gets a
marker on the incoming clip, which survives formats without transition objects.

Crossfades follow the sequence exactly: a k-frame crossfade overlaps the last k frames of
the outgoing shot; OTIO models that by trimming the outgoing clip by the transition's
``out_offset`` and the incoming clip by its ``in_offset`` (the trims are the handles the
dissolve uses), so the timeline's duration equals ``sequence.mp4``'s.
"""

from __future__ import annotations

import logging
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


def build_timeline(plan: Plan, shot_files: dict[str, str]) -> otio.schema.Timeline:
    """An OTIO timeline of the plan's shots referencing the shot files (relative paths)."""
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
    return timeline


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
    return written


def write_timeline(plan: Plan, shot_files: dict[str, str], path: str | Path) -> list[Path]:
    """Write the timeline as .otio JSON atomically, plus .xml / .edl beside it; returns the paths."""
    timeline = build_timeline(plan, shot_files)
    atomic_write_text(path, otio.adapters.write_to_string(timeline, "otio_json"))
    return [Path(path), *write_editorial(timeline, path)]
