"""FCP XML and EDL of a timeline at a rate SMPTE timecode lacks (12, 16 fps) are written at the nearest rate
they carry, in real time, with the retiming stated in each file, the .otio and the manifest."""

from __future__ import annotations

import json
from fractions import Fraction

import opentimelineio as otio
import pytest

from daotai.deliver.timeline import editorial_rate, editorial_retime, retimed, write_timeline
from daotai.plan.planner import plan_script
from daotai.script.load import parse_script

SCRIPT = {
    "size": "320x180", "scene": "office",
    "characters": [{"id": "lin", "position": [0.0, 0.0]}],
    "shots": [
        {"shot_id": "a", "duration": 1.3, "subject": "lin", "camera": {"type": "pan", "rotate": [10, 0, 0]}},
        {"shot_id": "b", "duration": 2.1, "subject": "lin", "transition": {"type": "crossfade", "duration": 0.5}},
        {"shot_id": "c", "duration": 1.7, "subject": "lin", "transition": {"type": "cut"}},
    ],
}


def _plan(fps: int):
    return plan_script(parse_script(json.dumps({**SCRIPT, "fps": fps}), fmt="json"))


@pytest.mark.parametrize(("fps", "rate"), [(16, 24), (12, 24), (15, 24), (20, 24), (24, 24), (25, 25), (30, 30),
                                           (40, 48), (Fraction(24000, 1001), Fraction(24000, 1001))])
def test_the_editorial_rate_is_the_nearest_timecode_rate(fps, rate):
    assert editorial_rate(Fraction(fps)) == rate


def test_a_16_fps_timeline_is_written_at_24_fps_in_real_time(tmp_path):
    plan = _plan(16)
    written = write_timeline(plan, {s.shot_id: f"shots/{s.shot_id}.mp4" for s in plan.shots}, tmp_path / "timeline.otio")
    assert [p.name for p in written] == ["timeline.otio", "timeline.xml", "timeline.edl"]
    retime = editorial_retime(plan)
    assert retime is not None and retime.fps == 24
    seconds = plan.total_frames / 16
    for path in written[1:]:
        text = path.read_text(encoding="utf-8")
        assert "written at 24 fps in real time" in " ".join(text.replace("* NOTE: ", "").split())
        kept = otio.adapters.read_from_file(str(path), rate=24) if path.suffix == ".edl" else \
            otio.adapters.read_from_file(str(path))
        assert kept.duration().rate == 24 and kept.duration().to_seconds() == pytest.approx(seconds, abs=1 / 48)
        assert [c.name for c in kept.video_tracks()[0].find_clips()] == ["a", "b", "c"]
    native = otio.adapters.read_from_file(str(written[0]))  # kept: OTIO frees a temporary's metadata
    meta = native.metadata["daotai"]["editorial"]
    # every clip starts and ends within half a 24 fps frame of where it does in the sequence, and is as long
    at_24 = retimed(native, retime)
    for before, after in zip(native.tracks[0], at_24.tracks[0], strict=True):
        if isinstance(before, otio.schema.Clip):
            was, now = before.range_in_parent(), after.range_in_parent()
            assert now.start_time.rate == 24
            assert abs(now.start_time.to_seconds() - was.start_time.to_seconds()) <= 1 / 48 + 1e-9
            assert abs(now.end_time_exclusive().to_seconds() - was.end_time_exclusive().to_seconds()) <= 1 / 48 + 1e-9
            assert abs(after.source_range.start_time.to_seconds() - before.source_range.start_time.to_seconds()) <= 1 / 48
        else:  # the crossfade: 8 frames at 16 fps, 12 at 24
            assert (before.in_offset.value + before.out_offset.value, after.in_offset.value + after.out_offset.value) == (8, 12)
    assert meta["fps"] == 24 and meta["source_fps"] == 16 and "100% speed" in meta["note"]


def test_a_24_fps_timeline_is_written_as_it_is(tmp_path):
    plan = _plan(24)
    written = write_timeline(plan, {s.shot_id: f"shots/{s.shot_id}.mp4" for s in plan.shots}, tmp_path / "timeline.otio")
    assert editorial_retime(plan) is None and len(written) == 3
    assert "NOTE" not in written[2].read_text(encoding="utf-8")
    native = otio.adapters.read_from_file(str(written[0]))
    assert "editorial" not in native.metadata["daotai"]
