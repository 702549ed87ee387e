"""Letterboxed aspect ratios: ``"1080p 2.39:1 letterbox"`` renders the 1920x804 picture and delivers
the sequence in the 1920x1080 frame between black bars; QC judges the picture, not the bars."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from daotai.encode.read import decode_frames, probe
from daotai.encode.video import VideoWriter
from daotai.errors import ScriptError
from daotai.plan.planner import plan_script, plan_to_json
from daotai.post.assemble import ClipSpec, assemble, letterboxed
from daotai.qc.metrics import scan_video
from daotai.script.aspect import bars, split_fit
from daotai.script.load import validate_script
from daotai.script.presets import apply_preset


def _size(size):
    return validate_script({"size": size, "shots": [{"shot_id": "a"}]}).size


@pytest.mark.parametrize(("text", "picture", "frame"), [
    ("1080p 2.39:1 letterbox", (1920, 804), (1920, 1080)),
    ("2.39:1 letterboxed", (1280, 536), (1280, 720)),  # no size named: the script's 1280x720
    ("1080p 4:3 遮幅", (1440, 1080), (1920, 1080)),  # bars at the sides
    ("1080p 9:16 加黑边", (608, 1080), (1920, 1080)),  # a portrait picture in the frame as it stands
    ("1080p 2.39:1 crop", (1920, 804), None),
    ("1080p 2.39:1", (1920, 804), None),
])
def test_a_word_after_the_ratio_letterboxes_it_in_the_named_frame(text, picture, frame):
    size = _size(text)
    assert ((size.width, size.height), size.letterbox) == (picture, frame)
    # the dump reads back as the same size, and a size without bars dumps as before
    dumped = size.model_dump(mode="json")
    assert _size(dumped) == size and ("letterbox" in dumped) == (frame is not None)


def test_a_fit_word_without_a_ratio_and_a_frame_too_small_are_refused_by_name():
    with pytest.raises(ScriptError, match=r"'letterbox' says how an aspect ratio meets the size, and none is given"):
        _size("1080p letterbox")
    with pytest.raises(ScriptError, match=r"letterbox: \[300, 180\] must hold the 320x134 picture"):
        _size({"width": 320, "height": 134, "letterbox": [300, 180]})
    assert split_fit("720p 1.85:1 Letterbox") == ("720p 1.85:1", "letterbox")
    assert split_fit("1080p") == ("1080p", None)


def test_bars_are_even_and_the_odd_remainder_goes_below():
    assert bars((1920, 1080), (1920, 804)) == (0, 138)  # 138 above, 138 below
    assert bars((320, 180), (320, 134)) == (0, 22)  # 22 above, 24 below
    assert bars((1920, 1080), (608, 1080)) == (656, 0)
    with pytest.raises(ValueError, match="does not fit"):
        bars((320, 180), (320, 200))


def test_presets_size_the_frame_and_keep_the_picture_inside_it():
    script = validate_script({"size": "1080p 2.39:1 letterbox", "shots": [{"shot_id": "a"}]})
    preview = apply_preset(script, "preview").size
    assert ((preview.width, preview.height), preview.letterbox) == ((640, 268), (640, 360))
    tall = validate_script({"size": "1080p 9:16 letterbox", "shots": [{"shot_id": "a"}]})
    draft = apply_preset(tall, "draft").size
    assert ((draft.width, draft.height), draft.letterbox) == ((406, 720), (1280, 720))


def test_the_plan_carries_the_frame_only_when_letterboxed():
    boxed = plan_script(validate_script({"size": "320x180 2.39:1 letterbox", "shots": [{"shot_id": "a"}]}))
    assert (boxed.width, boxed.height, boxed.letterbox, boxed.delivery_size) == (320, 134, (320, 180), (320, 180))
    plain = plan_script(validate_script({"size": "320x180 2.39:1", "shots": [{"shot_id": "a"}]}))
    assert plain.letterbox is None and plain.delivery_size == (320, 134)
    assert '"letterbox"' not in plan_to_json(plain)  # plans without bars read as before


def test_the_assembled_sequence_has_black_bars_and_qc_judges_the_picture(tmp_path):
    picture = np.full((54, 128, 3), 20, np.uint8)  # a dim night picture: dark, but not black
    picture[20:34, 50:78] = (30, 26, 22)
    clips = []
    for n in range(2):
        path = tmp_path / f"c{n}.mp4"
        with VideoWriter(path, 128, 54, Fraction(12)) as writer:
            for _ in range(6):
                writer.write(picture)
        clips.append(ClipSpec(path))
    out = tmp_path / "sequence.mp4"
    result = assemble(clips, out, 12, letterbox=(128, 72))
    info = probe(out)
    assert (info.width, info.height, info.frames) == (128, 72, 12) and (result.width, result.height) == (128, 72)
    frames = list(decode_frames(out))
    top, bottom = 8, 8 + 54  # bars((128, 72), (128, 54)) == (0, 8)
    for frame in frames:
        assert frame[:top].max() <= 3 and frame[bottom:].max() <= 3  # the bars are black
        assert np.abs(frame[top:bottom].astype(int) - picture).mean() < 2  # the picture, in place
    # with the bars the frame's mean luma falls under the black-frame bound; the picture alone is above it
    assert scan_video(out).black_frames == tuple(range(12))
    assert scan_video(out, picture=(0.0, top / 72, 1.0, bottom / 72)).black_frames == ()
    with pytest.raises(Exception, match="letterbox"):
        assemble(clips, tmp_path / "too_small.mp4", 12, letterbox=(128, 40))
    assert letterboxed(picture, 128, 54) is picture
