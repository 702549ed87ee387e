"""Timing arithmetic: frame counts, backend snapping tables, size rounding."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daotai.catalog import SnapRule, snap_rules
from daotai.errors import PlanError
from daotai.plan.timing import (
    frames_for,
    is_even_size,
    is_snapped,
    round_size,
    round_to_multiple,
    seconds_for,
    snap_for,
    snap_frames,
)


@pytest.mark.parametrize(
    ("duration", "fps", "frames"),
    [
        (4.0, 24, 96),
        (5.0, 16, 80),
        (4.1, 30, 123),  # 122.99999999999999 in binary floating point
        (0.1, 25, 3),  # 2.5000000000000004 -> half up
        (2.5, 1, 3),  # exact half rounds up, not to even
        (3.5, 1, 4),
        (0.3, 5, 2),  # 1.5
        (1 / 48, 24, 1),  # 0.5 -> 1
        (2.49, 1, 2),
        (0.01, 24, 1),  # 0.24 frames still gives one frame
        (1001 / 24000 * 100, 24000 / 1001, 100),  # NTSC rate
    ],
)
def test_frames_for_rounds_half_up_and_gives_at_least_one(duration, fps, frames):
    assert frames_for(duration, fps) == frames


@pytest.mark.parametrize(("duration", "fps"), [(0, 24), (-1, 24), (1, 0), (math.nan, 24), (1, math.inf)])
def test_frames_for_refuses_non_positive_or_non_finite(duration, fps):
    with pytest.raises(PlanError, match="must be a finite number > 0"):
        frames_for(duration, fps)


def test_seconds_for():
    assert seconds_for(96, 24) == 4.0
    assert seconds_for(0, 24) == 0.0
    with pytest.raises(PlanError):
        seconds_for(-1, 24)


@given(st.integers(1, 100_000), st.sampled_from([8, 12, 16, 23.976, 24, 25, 29.97, 30, 50, 60]))
def test_frames_seconds_round_trip(frames, fps):
    assert frames_for(seconds_for(frames, fps), fps) == frames


@pytest.mark.parametrize(
    ("frames", "step", "snapped"),
    [
        (81, 4, 81),
        (82, 4, 85),
        (84, 4, 85),
        (85, 4, 85),
        (1, 4, 5),  # k >= 1: a single frame still needs one full step
        (5, 4, 5),
        (6, 4, 9),
        (121, 8, 121),
        (120, 8, 121),
        (122, 8, 129),
        (97, 8, 97),
        (1, 8, 9),
    ],
)
def test_snap_frames_table(frames, step, snapped):
    assert snap_frames(frames, step) == snapped
    assert is_snapped(snapped, step)


@pytest.mark.parametrize(
    ("frames", "step", "snapped"),
    [(81, 4, True), (82, 4, False), (1, 4, False), (121, 8, True), (120, 8, False)],
)
def test_is_snapped_table(frames, step, snapped):
    assert is_snapped(frames, step) is snapped


@given(st.integers(1, 5000), st.integers(1, 64))
def test_snap_frames_is_the_smallest_valid_count_not_below_request(frames, step):
    snapped = snap_frames(frames, step)
    assert snapped >= frames
    assert is_snapped(snapped, step)
    smaller = snapped - step
    assert smaller < frames or not is_snapped(smaller, step)


@pytest.mark.parametrize(
    ("width", "height", "multiple", "expected"),
    [
        (1920, 1080, 16, (1920, 1088)),  # 67.5 multiples -> half up to 68
        (1920, 1080, 32, (1920, 1088)),  # 33.75 -> 34
        (1280, 720, 16, (1280, 720)),
        (832, 480, 16, (832, 480)),
        (1000, 1000, 32, (992, 992)),  # 31.25 -> 31: nearest, so it may shrink
        (1008, 1008, 32, (1024, 1024)),  # 31.5 -> 32
        (1281, 721, 2, (1282, 722)),  # odd sides -> next even
        (5, 5, 16, (16, 16)),  # never below one multiple
    ],
)
def test_round_size_nearest_multiple_half_up(width, height, multiple, expected):
    assert round_size(width, height, multiple) == expected


@given(st.integers(1, 10_000), st.integers(1, 128))
def test_round_to_multiple_is_nearest(value, multiple):
    rounded = round_to_multiple(value, multiple)
    assert rounded % multiple == 0 and rounded >= multiple
    if value >= multiple:
        assert abs(rounded - value) * 2 <= multiple


def test_is_even_size():
    assert is_even_size(1920, 1080)
    assert not is_even_size(1921, 1080)
    assert not is_even_size(1920, 1081)


SNAP_RULES = snap_rules()


def test_snap_rules_table():
    assert list(SNAP_RULES) == ["previz", "wan", "ltx"]  # the order plan.json lists them in
    assert SNAP_RULES["previz"] == SnapRule("previz", None, 2, None)
    assert SNAP_RULES["wan"] == SnapRule("wan", 4, 16, 16.0)
    assert SNAP_RULES["ltx"] == SnapRule("ltx", 8, 32, 24.0)
    with pytest.raises(TypeError):
        SNAP_RULES["wan"] = SNAP_RULES["ltx"]  # type: ignore[index]


def test_snap_for_reports_without_changing_the_request():
    wan = snap_for(SNAP_RULES["wan"], 1920, 1080, 82)
    assert (wan.requested_width, wan.requested_height, wan.requested_frames) == (1920, 1080, 82)
    assert (wan.width, wan.height, wan.frames) == (1920, 1088, 85)
    assert wan.changed
    assert wan.describe() == "wan: size 1920x1080 -> 1920x1088, frames 82 -> 85"

    ltx = snap_for(SNAP_RULES["ltx"], 768, 512, 97)
    assert not ltx.changed and (ltx.width, ltx.height, ltx.frames) == (768, 512, 97)
    assert ltx.describe() == "ltx: request fits as is"

    previz = snap_for(SNAP_RULES["previz"], 1281, 720, 82)  # previz takes any frame count
    assert (previz.width, previz.height, previz.frames, previz.changed) == (1282, 720, 82, True)


def test_snap_for_refuses_bad_frames():
    with pytest.raises(PlanError, match="frames: 0 must be an integer >= 1"):
        snap_for(SNAP_RULES["wan"], 832, 480, 0)


@pytest.mark.parametrize("step, offset, min_s, max_s", [(4, 1, 1.0, 81 / 16), (8, 1, 0.5, 121 / 16)])
def test_segments_cover_every_frame_once_within_the_models_length(step, offset, min_s, max_s):
    # Each later segment repeats its predecessor's last frame, so n segments of F frames supply
    # F + (n - 1)(F - 1): counting that shared frame twice would ask the model for longer clips.
    from daotai.plan.timing import plan_segments

    longest = max(f for f in range(1, 400) if is_snapped(f, step, offset) and f <= max_s * 16 + 1e-9)
    for wanted in range(1, 4 * longest):
        segments = plan_segments(wanted / 16, 16.0, step, offset, min_s, max_s)
        assert sum(s.keep for s in segments) == wanted
        assert [s.start for s in segments] == [sum(s.keep for s in segments[:i]) for i in range(len(segments))]
        for s in segments:
            assert is_snapped(s.frames, step, offset) and s.frames <= longest, (wanted, s)
            assert 1 <= s.keep <= s.frames - (1 if s.index else 0), (wanted, s)
        if len(segments) > 1:  # the fewest segments that can make it
            n = len(segments) - 1
            assert longest + (n - 1) * (longest - 1) < wanted, (wanted, segments)
