"""The timeline's soundtrack track (A2) with offsets: a gap until a late start, a skip into the file
for an early one, cut at the end of the picture or ending by itself, at whole and NTSC rates."""

from __future__ import annotations

import opentimelineio as otio
import pytest

from daotai.deliver.timeline import TimelineSound, build_timeline
from daotai.plan.planner import plan_script
from daotai.script.load import validate_script


def plan_of(fps, seconds=(1.0, 2.0), fade_out=None):
    script = {"fps": fps, "characters": [{"id": "a"}],
              "shots": [{"shot_id": f"s{i}", "duration": d} for i, d in enumerate(seconds)]}
    if fade_out is not None:
        script["fade_out"] = fade_out
    return plan_script(validate_script(script))


def with_soundtrack(plan, offset_s, duration_s):
    """The timeline (hold it while reading its tracks: items live as long as their timeline)."""
    sound = TimelineSound(soundtrack="music/bed.wav", soundtrack_duration_s=duration_s, soundtrack_offset_s=offset_s,
                          soundtrack_gain_db=-2.0)
    return build_timeline(plan, {s.shot_id: f"shots/{s.shot_id}.mp4" for s in plan.shots}, sound)


def layout(track):
    """[(kind, start frame in the file or None, frames)] of a track's items."""
    items = []
    for item in track:
        if isinstance(item, otio.schema.Gap):
            items.append(("gap", None, item.duration().value))
        else:
            items.append(("clip", item.source_range.start_time.value, item.source_range.duration.value))
    return items


@pytest.mark.parametrize("offset, duration, expected", [
    (0.0, 10.0, [("clip", 0, 72)]),  # from the top, cut by the picture's end
    (0.5, 10.0, [("gap", None, 12), ("clip", 0, 60)]),  # starts half a second in
    (-1.0, 10.0, [("clip", 24, 72)]),  # skips its first second
    (0.0, 2.0, [("clip", 0, 48)]),  # ends by itself before the picture does
    (0.5, 2.0, [("gap", None, 12), ("clip", 0, 48)]),
    (-1.0, 2.0, [("clip", 24, 24)]),  # a second skipped of a 2 s file: one second left
    (-2.5, 2.0, []),  # skipped past its end: nothing plays
    (4.0, 10.0, [("gap", None, 72)]),  # starts after the picture ends: a gap the picture's length
    (2.9, 10.0, [("gap", None, 70), ("clip", 0, 2)]),
])
def test_the_soundtrack_sits_at_its_offset_for_its_length(offset, duration, expected):
    timeline = with_soundtrack(plan_of(24, (1.0, 2.0)), offset, duration)
    track = timeline.tracks[2]
    assert layout(track) == expected
    for item in track:
        if isinstance(item, otio.schema.Clip):
            assert item.media_reference.available_range.duration.value == int(duration * 24)
            assert item.metadata["daotai"] == {"gain_db": -2.0, "offset_s": offset}
    assert track.duration().value <= 72


@pytest.mark.parametrize("fps, offset, expected", [
    (29.97, 1.0, [("gap", None, 30), ("clip", 0, 60)]),  # 29.97 frames: the nearest whole frame
    (29.97, -0.5, [("clip", 15, 90)]),  # 14.985 frames skipped: 15
    (59.94, 0.25, [("gap", None, 15), ("clip", 0, 165)]),  # 14.985 frames: 15
])
def test_offsets_at_ntsc_rates_land_on_the_nearest_frame(fps, offset, expected):
    plan = plan_of(fps, (1.0, 2.0))
    timeline = with_soundtrack(plan, offset, 20.0)
    assert layout(timeline.tracks[2]) == expected
    assert sum(n for _, _, n in expected) == plan.total_frames


def test_the_soundtrack_fades_with_the_film_only_where_it_reaches_the_end():
    plan = plan_of(24, (1.0, 2.0), fade_out=0.5)
    reaching_timeline = with_soundtrack(plan, 0.5, 10.0)
    reaching = [i for i in reaching_timeline.tracks[2] if isinstance(i, otio.schema.Clip)][0]
    assert [(e.effect_name, e.metadata["frames"]) for e in reaching.effects] == [("AudioFadeOut", 12)]
    ending_timeline = with_soundtrack(plan, 0.0, 2.0)
    ending = [i for i in ending_timeline.tracks[2] if isinstance(i, otio.schema.Clip)][0]
    assert list(ending.effects) == []


def test_shot_sound_and_picture_tracks_last_as_long_as_the_picture_whatever_the_offset():
    plan = plan_of(24, (1.0, 2.0))
    sound = TimelineSound(shots_with_sound=frozenset({"s1"}), soundtrack="bed.wav", soundtrack_duration_s=1.0,
                          soundtrack_offset_s=0.5)
    timeline = build_timeline(plan, {"s0": "shots/s0.mp4", "s1": "shots/s1.mp4"}, sound)
    picture, shots, music = timeline.tracks
    assert picture.duration().value == shots.duration().value == 72
    assert music.duration().value == 12 + 24  # half a second of gap, then the one-second file
