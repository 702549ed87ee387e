"""Spellings read back what was written: a colour formatted as '#RRGGBB' parses to its channels, a
duration written as text reads as its seconds, and a frame count survives seconds and back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from daotai.plan.timing import frames_for, seconds_for
from daotai.script.load import validate_script
from daotai.script.spellings import read_seconds

channel = st.integers(0, 255)


@settings(max_examples=80, deadline=None)
@given(r=channel, g=channel, b=channel, upper=st.booleans(), hash_sign=st.booleans())
def test_a_colour_written_as_hex_reads_back_as_its_channels(r, g, b, upper, hash_sign):
    text = ("#" if hash_sign else "") + f"{r:02x}{g:02x}{b:02x}"
    text = text.upper() if upper else text
    colour = validate_script({"characters": [{"id": "a", "colour": text}], "shots": [{"shot_id": "s"}]}
                             ).characters[0].colour
    assert tuple(round(c * 255) for c in colour) == (r, g, b)
    assert "#{:02x}{:02x}{:02x}".format(*(round(c * 255) for c in colour)) == f"#{r:02x}{g:02x}{b:02x}"


@settings(max_examples=80, deadline=None)
@given(minutes=st.integers(0, 9), seconds=st.integers(0, 59), tenths=st.integers(0, 9))
def test_durations_written_as_text_read_back_as_their_seconds(minutes, seconds, tenths):
    total = minutes * 60 + seconds + tenths / 10
    assert read_seconds(f"{minutes}m{seconds}.{tenths}s") == total
    assert read_seconds(f"{minutes}:{seconds:02d}.{tenths}") == total
    assert read_seconds(f"{total * 1000:.0f}ms") == round(total * 1000) / 1000
    assert read_seconds(f"{minutes}分{seconds}.{tenths}秒") == total


@settings(max_examples=80, deadline=None)
@given(frames=st.integers(1, 10**5), fps=st.sampled_from([12, 23.976, 24, 25, 29.97, 30, 48, 50, 59.94, 60]))
def test_frames_to_seconds_and_back_is_the_identity(frames, fps):
    assert frames_for(seconds_for(frames, fps), fps) == frames
